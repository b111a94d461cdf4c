// The messages dlrun's ranks exchange with rank 0 over their TCP control connection:
// one text line each, "VERB field ..." (the last field of WANT, EXIT and END is free
// text). Small and readable on purpose: a handful per checkpoint, visible in a packet
// capture or `strace` when something hangs.
//
//   to rank 0                                from rank 0
//   HELLO <rank>                             PREPARE <seq>
//   WANT <stop 0|1> <why>                    TARGET <seq> <step> <stop 0|1>
//   STEP <seq> <frozen 0|1> <step>           STOPAFTER <seq>
//   DONE <seq> <step>                        END <exit code> <why>
//   EXIT <exit code> <how>
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dl {

enum class MsgKind { hello, want, step, done, exit, prepare, target, stop_after, end };

struct Message {
  MsgKind kind = MsgKind::hello;
  std::uint32_t rank = 0;  // HELLO
  std::uint64_t seq = 0;   // STEP, DONE, PREPARE, TARGET, STOPAFTER
  std::int64_t step = -1;  // STEP, DONE, TARGET
  bool flag = false;       // WANT: stop; STEP: frozen; TARGET: stop
  int code = 0;            // EXIT, END: exit code
  std::string text;        // HELLO: the rank's node; WANT, EXIT, END: why / how
};

// One line, with its '\n'. Text fields must not contain a newline (replaced by ' ').
std::string format_message(const Message& m);
// Throws dl::SystemError naming the line when it is not a valid message.
Message parse_message(std::string_view line);

// Collects bytes from a stream socket and returns complete lines (without '\n').
class LineBuffer {
 public:
  // A longer line is a protocol error: throws dl::SystemError.
  static constexpr std::size_t kMaxLine = 4096;
  void append(std::string_view data);
  std::optional<std::string> next_line();

 private:
  std::string data_;
};

}  // namespace dl
