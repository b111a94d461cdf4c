// "[rank 3@n2]": the prefix of every line dlrun and the program it runs write, so that
// the merged output of a job says which rank on which node said what.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace dl {

std::string rank_prefix(std::uint32_t rank, std::string_view node);

// Cuts a byte stream into lines and hands each one, prefixed, to `emit` (with its
// newline). A partial line waits for the rest, except that a line longer than
// `max_line` is cut there so that memory stays bounded. finish() emits what is left,
// with a newline added.
class LinePrefixer {
 public:
  using Emit = std::function<void(std::string_view)>;
  LinePrefixer(std::string prefix, Emit emit, std::size_t max_line = 64 * 1024);

  void feed(std::string_view data);
  void finish();

 private:
  void emit_line(std::string_view line);

  std::string prefix_;
  Emit emit_;
  std::size_t max_line_;
  std::string partial_;
};

}  // namespace dl
