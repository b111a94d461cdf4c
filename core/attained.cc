#include "core/attained.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <vector>

#include "core/error.h"

namespace dl {
namespace {

constexpr std::string_view kHeader = "slurm-dl attained-service 1";

// FNV-1a: enough to tell a torn or edited file from one this code wrote.
std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t h = 14695981039346656037ull;
  for (const unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

template <typename T>
T field(std::string_view& line, std::size_t line_no) {
  const auto sp = line.find(' ');
  const auto word = line.substr(0, sp);
  line = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
  T value{};
  const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
  if (ec != std::errc() || end != word.data() + word.size() || word.empty()) {
    throw InputError(fmt::format("attained-service state line {}: bad field '{}'", line_no, word));
  }
  return value;
}

}  // namespace

void AttainedService::bank(Entry& e, std::int64_t until) {
  if (e.run_start == 0) return;
  e.banked_gpu_s +=
      static_cast<double>(std::max<std::int64_t>(until - e.run_start, 0)) * e.run_gpus;
  e.run_start = 0;
  e.run_gpus = 0;
}

void AttainedService::running(std::uint32_t job, std::int64_t start, std::uint32_t gpus,
                              std::int64_t now) {
  Entry& e = jobs_[job];
  if (e.run_start != start) {
    bank(e, e.last_seen);
    e.run_start = start;
  }
  e.run_gpus = gpus;
  e.last_seen = std::max(now, start);
}

void AttainedService::stopped(std::uint32_t job, std::int64_t end) {
  const auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  Entry& e = it->second;
  bank(e, end > e.run_start ? end : e.last_seen);
}

double AttainedService::attained(std::uint32_t job, std::int64_t now) const {
  const auto it = jobs_.find(job);
  if (it == jobs_.end()) return 0;
  const Entry& e = it->second;
  double total = e.banked_gpu_s;
  if (e.run_start != 0) {
    total += static_cast<double>(std::max<std::int64_t>(now - e.run_start, 0)) * e.run_gpus;
  }
  return total;
}

std::string AttainedService::serialize() const {
  std::string body;
  for (const auto& [job, e] : jobs_) {
    body += fmt::format("{} {:.0f} {} {} {}\n", job, e.banked_gpu_s, e.run_start, e.run_gpus,
                        e.last_seen);
  }
  return fmt::format("{}\n{}end {} {:016x}\n", kHeader, body, jobs_.size(), fnv1a(body));
}

AttainedService AttainedService::parse(std::string_view text) {
  const auto fail = [](const std::string& why) {
    return InputError(fmt::format("attained-service state: {}", why));
  };
  if (text.substr(0, kHeader.size() + 1) != fmt::format("{}\n", kHeader)) {
    throw fail("missing header");
  }
  text.remove_prefix(kHeader.size() + 1);
  const auto trailer_at = text.rfind("end ");
  if (trailer_at == std::string_view::npos || (trailer_at != 0 && text[trailer_at - 1] != '\n') ||
      text.back() != '\n') {
    throw fail("missing trailer (torn write?)");
  }
  const auto body = text.substr(0, trailer_at);
  auto trailer = text.substr(trailer_at + 4, text.size() - trailer_at - 5);
  const auto count = field<std::size_t>(trailer, 0);
  std::uint64_t sum = 0;
  const auto [end, ec] = std::from_chars(trailer.data(), trailer.data() + trailer.size(), sum, 16);
  if (ec != std::errc() || end != trailer.data() + trailer.size() || sum != fnv1a(body)) {
    throw fail("checksum mismatch");
  }
  AttainedService ledger;
  std::size_t line_no = 1;
  std::size_t start = 0;
  while (start < body.size()) {
    const auto nl = body.find('\n', start);
    auto line = body.substr(start, nl - start);
    start = nl + 1;
    ++line_no;
    const auto job = field<std::uint32_t>(line, line_no);
    Entry e;
    e.banked_gpu_s = field<double>(line, line_no);
    e.run_start = field<std::int64_t>(line, line_no);
    e.run_gpus = field<std::uint32_t>(line, line_no);
    e.last_seen = field<std::int64_t>(line, line_no);
    if (!line.empty()) throw fail(fmt::format("line {}: trailing data", line_no));
    ledger.jobs_[job] = e;
  }
  if (ledger.jobs_.size() != count) throw fail("entry count mismatch");
  return ledger;
}

}  // namespace dl
