// libFuzzer target for what dlrun reads from other processes: control messages from
// other ranks and from strangers on rank 0's control port (through LineBuffer and the
// HELLO check), rank 0's rendezvous, the restart history file and
// SLURM_STEP_RESV_PORTS. Every input must be accepted or rejected with the documented
// exception (any other exception aborts), and an accepted message or history must
// survive format -> parse unchanged.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "launcher/control.h"
#include "launcher/launch.h"
#include "launcher/ports.h"
#include "launcher/restart.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  dl::LineBuffer buffer;
  try {
    // In uneven pieces, as a stream socket delivers them.
    for (std::size_t i = 0; i < text.size(); i += 1 + i % 7)
      buffer.append(text.substr(i, 1 + i % 7));
    while (const auto line = buffer.next_line()) {
      // Only the secret's holder gets in: the fuzzer does not know it.
      if (dl::check_hello(*line, "5ec2e7", 8).hello && line->find("5ec2e7") == std::string::npos) {
        std::abort();
      }
      try {
        const dl::Message m = dl::parse_message(*line);
        const std::string again = dl::format_message(m);
        if (dl::format_message(dl::parse_message(again.substr(0, again.size() - 1))) != again) {
          std::abort();
        }
      } catch (const dl::SystemError&) {
      }
    }
  } catch (const dl::SystemError&) {
  }

  try {
    const dl::Rendezvous r = dl::decode_rendezvous(text);
    if (r.error.empty() && dl::encode_rendezvous(dl::decode_rendezvous(dl::encode_rendezvous(r))) !=
                               dl::encode_rendezvous(r)) {
      std::abort();
    }
  } catch (const dl::SystemError&) {
  }

  try {
    const dl::RestartHistory h = dl::decode_history(text);
    const dl::RestartHistory back = dl::decode_history(dl::encode_history(h));
    if (back.failures != h.failures || back.stalled != h.stalled) std::abort();
  } catch (const dl::InputError&) {
  }

  try {
    dl::parse_port_list(text);
  } catch (const dl::InputError&) {
  }
  return 0;
}
