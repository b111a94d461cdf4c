// libFuzzer target for the core value parsers: any input either parses or throws
// dl::InputError, and every accepted duration survives format -> parse unchanged.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/parse.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    dl::parse_uint("--x", text, 0, UINT64_MAX);
  } catch (const dl::InputError&) {
  }
  try {
    const auto max = std::chrono::seconds(86400L * 365 * 100);
    const auto d = dl::parse_duration("--x", text, std::chrono::seconds(0), max);
    if (dl::parse_duration("--x", dl::format_duration(d), std::chrono::seconds(0), max) != d) {
      std::abort();
    }
  } catch (const dl::InputError&) {
  }
  return 0;
}
