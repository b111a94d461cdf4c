#include "launcher/rank_log.h"

#include <fmt/format.h>

namespace dl {

std::string rank_prefix(std::uint32_t rank, std::string_view node) {
  return fmt::format("[rank {}@{}]", rank, node);
}

LinePrefixer::LinePrefixer(std::string prefix, Emit emit, std::size_t max_line)
    : prefix_(std::move(prefix)), emit_(std::move(emit)), max_line_(max_line) {}

void LinePrefixer::emit_line(std::string_view line) {
  std::string out;
  out.reserve(prefix_.size() + 1 + line.size() + 1);
  out += prefix_;
  out += ' ';
  out += line;
  out += '\n';
  emit_(out);
}

void LinePrefixer::feed(std::string_view data) {
  while (!data.empty()) {
    const std::size_t nl = data.find('\n');
    if (nl == std::string_view::npos) {
      partial_.append(data);
      while (partial_.size() >= max_line_) {
        emit_line(std::string_view(partial_).substr(0, max_line_));
        partial_.erase(0, max_line_);
      }
      return;
    }
    if (partial_.empty()) {
      emit_line(data.substr(0, nl));
    } else {
      partial_.append(data.substr(0, nl));
      emit_line(partial_);
      partial_.clear();
    }
    data.remove_prefix(nl + 1);
  }
}

void LinePrefixer::finish() {
  if (partial_.empty()) return;
  emit_line(partial_);
  partial_.clear();
}

}  // namespace dl
