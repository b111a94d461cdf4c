// The messages dlrun's ranks exchange with rank 0 over their TCP control connection:
// one text line each, "VERB field ..." (the last field of WANT, EXIT and END is free
// text). A connection counts as a rank only once its first line is a HELLO carrying the
// step's secret. The messages and what each is for: docs/design/control-protocol.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dl {

enum class MsgKind {
  hello,
  want,
  step,
  done,
  exit,
  prepare,
  target,
  stop_after,
  end,
  progress,
  dump,
  trace,
  traced,
  gpu
};

struct Message {
  MsgKind kind = MsgKind::hello;
  std::uint32_t rank = 0;  // HELLO
  std::uint64_t seq = 0;   // STEP, DONE, PREPARE, TARGET, STOPAFTER; PROGRESS: age in ms
  std::int64_t step = -1;  // STEP, DONE, TARGET, PROGRESS
  bool flag = false;       // WANT: stop; STEP: frozen; TARGET: stop; TRACED: failed;
                           // PROGRESS: busy in a checkpoint round
  int code = 0;            // EXIT, END: exit code
  std::string text;        // HELLO: the rank's node; WANT, EXIT, END, DUMP, TRACED: why / how;
                           // TRACE: a line of stacks; GPU: the samples
  std::string key;         // HELLO: the step's secret, lower-case hex
};

// One line, with its '\n'. Text fields must not contain a newline (replaced by ' ').
std::string format_message(const Message& m);
// Throws dl::SystemError naming the line when it is not a valid message.
Message parse_message(std::string_view line);

// A new step secret: kSecretBytes from getrandom(2), as lower-case hex. Throws
// dl::SystemError when the kernel has no randomness to give.
inline constexpr std::size_t kSecretBytes = 32;
std::string new_step_secret();

// Compares two secrets in time that depends only on their lengths, so that a stranger
// cannot guess the secret byte by byte from how fast it is refused.
bool same_secret(std::string_view a, std::string_view b);

// The verdict on the first line of a connection to rank 0's control port: the HELLO of
// a rank other than 0 below `world_size`, carrying `secret`; otherwise `why` says what
// is wrong (for rank 0's log; the stranger is told nothing).
struct HelloCheck {
  std::optional<Message> hello;
  std::string why;
};
HelloCheck check_hello(std::string_view line, std::string_view secret, std::uint32_t world_size);

// Collects bytes from a stream socket and returns complete lines (without '\n').
class LineBuffer {
 public:
  // A longer line is a protocol error: throws dl::SystemError.
  static constexpr std::size_t kMaxLine = 4096;
  void append(std::string_view data);
  std::optional<std::string> next_line();
  // Bytes received but not yet returned as a line.
  std::size_t pending() const { return data_.size(); }

 private:
  std::string data_;
};

}  // namespace dl
