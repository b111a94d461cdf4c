#include "sched/ledger.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <vector>

#include "core/error.h"

namespace dl {
namespace {

constexpr std::string_view kHeader = "slurm-dl service-ledger 1";

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
T field(std::string_view& line, std::size_t line_no, int base = 10) {
  const auto sp = line.find(' ');
  const auto word = line.substr(0, sp);
  line = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
  T value{};
  std::from_chars_result r{};
  if constexpr (std::is_floating_point_v<T>) {
    r = std::from_chars(word.data(), word.data() + word.size(), value);
  } else {
    r = std::from_chars(word.data(), word.data() + word.size(), value, base);
  }
  if (word.empty() || r.ec != std::errc() || r.ptr != word.data() + word.size()) {
    throw InputError(fmt::format("service ledger line {}: bad field '{}'", line_no, word));
  }
  return value;
}

double span_seconds(std::int64_t from, std::int64_t to) {
  return static_cast<double>(std::max<std::int64_t>(to - from, 0));
}

}  // namespace

void ServiceLedger::end_run(Entry& e, std::int64_t at) {
  if (e.run.start == 0) return;
  e.gpu_s += span_seconds(e.run.start, at) * e.gpus;
  e.run = {};
}

void ServiceLedger::end_wait(Entry& e, std::int64_t at) {
  if (e.wait.start == 0) return;
  e.wait_s += span_seconds(e.wait.start, at);
  e.wait = {};
}

void ServiceLedger::run(Entry& e, std::int64_t start, std::uint32_t gpus, std::int64_t now) {
  end_wait(e, e.wait.start != 0 && start > e.wait.start ? start : e.wait.seen);
  if (e.run.start != start) {
    end_run(e, e.run.seen);
    e.run.start = start;
  }
  e.gpus = gpus;
  e.run.seen = std::max(now, start);
}

void ServiceLedger::wait(Entry& e, std::int64_t eligible_since, std::int64_t now) {
  end_run(e, e.run.seen);
  if (eligible_since == 0 || eligible_since > now) {
    end_wait(e, e.wait.seen);
    return;
  }
  if (e.wait.start != eligible_since) {
    end_wait(e, e.wait.seen);
    e.wait.start = eligible_since;
  }
  e.wait.seen = now;
}

void ServiceLedger::stop(Entry& e, std::int64_t end) {
  end_run(e, end > e.run.start ? end : e.run.seen);
  end_wait(e, e.wait.seen);
}

Service ServiceLedger::service(const Entry& e, std::int64_t now) {
  Service s;
  s.attained = e.gpu_s + (e.run.start != 0 ? span_seconds(e.run.start, now) * e.gpus : 0);
  s.waited = e.wait_s + (e.wait.start != 0 ? span_seconds(e.wait.start, now) : 0);
  s.gpus = e.gpus;
  return s;
}

Service ServiceLedger::observe(std::uint32_t job, const JobSnapshot& s, std::int64_t now) {
  if (s.running) {
    // Where Slurm enforces limits it clears accrue_time when the job starts; its
    // BeginTime is then when it became eligible (Slurm sets it when a dependency ends).
    const std::int64_t eligible = s.accrue != 0 ? s.accrue : std::max(s.submit, s.begin);
    const auto [it, added] = jobs_.try_emplace(job);
    Entry& e = it->second;
    if (added && eligible != 0) e.wait_s = span_seconds(eligible, s.start);
    mark(e);
    run(e, s.start, s.gpus, now);
    return service(e, now);
  }
  if (s.pending && !s.completing && !s.held) {
    // A pending job waits from when Slurm counts its age (accrue_time), not from its
    // submission: a wait on a dependency (BeginTime 0 until it ends) is no wait.
    if (!s.requeued) return {0, s.accrue != 0 ? span_seconds(s.accrue, now) : 0, 0};
    Entry& e = jobs_[job];
    mark(e);
    // Requeued and not seen completing: Slurm has reset its EndTime, but its new
    // SubmitTime is when it left its nodes, which ends its run better than the last
    // sample that saw it running (up to an interval before).
    if (e.run.start != 0 && s.submit > e.run.start) {
      end_run(e, std::min<std::int64_t>(s.submit, now));
    }
    wait(e, s.accrue, now);
    return service(e, now);
  }
  const auto it = jobs_.find(job);
  if (it == jobs_.end()) return {};
  mark(it->second);
  stop(it->second, s.finished || s.completing ? s.end : 0);
  return service(it->second, now);
}

void ServiceLedger::end_sweep() {
  if (seen_ == jobs_.size()) return;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    it = it->second.sweep == sweep_ ? std::next(it) : jobs_.erase(it);
  }
}

void ServiceLedger::running(std::uint32_t job, std::int64_t start, std::uint32_t gpus,
                            std::int64_t now) {
  run(jobs_[job], start, gpus, now);
}

void ServiceLedger::pending(std::uint32_t job, std::int64_t eligible_since, std::int64_t now) {
  wait(jobs_[job], eligible_since, now);
}

void ServiceLedger::stopped(std::uint32_t job, std::int64_t end) {
  const auto it = jobs_.find(job);
  if (it != jobs_.end()) stop(it->second, end);
}

double ServiceLedger::attained(std::uint32_t job, std::int64_t now) const {
  const auto it = jobs_.find(job);
  return it == jobs_.end() ? 0 : service(it->second, now).attained;
}

double ServiceLedger::waited(std::uint32_t job, std::int64_t now) const {
  const auto it = jobs_.find(job);
  return it == jobs_.end() ? 0 : service(it->second, now).waited;
}

std::string ServiceLedger::serialize() const {
  // In job order, so that the same ledger always gives the same text.
  std::vector<std::uint32_t> ids;
  ids.reserve(jobs_.size());
  for (const auto& entry : jobs_) ids.push_back(entry.first);
  std::sort(ids.begin(), ids.end());
  std::string body;
  for (const auto job : ids) {
    const Entry& e = jobs_.at(job);
    body += fmt::format("{} {:.0f} {} {} {} {:.0f} {} {}\n", job, e.gpu_s, e.run.start, e.run.seen,
                        e.gpus, e.wait_s, e.wait.start, e.wait.seen);
  }
  return fmt::format("{}\n{}end {} {:016x}\n", kHeader, body, jobs_.size(), fnv1a(body));
}

ServiceLedger ServiceLedger::parse(std::string_view text) {
  const auto fail = [](const std::string& why) {
    return InputError(fmt::format("service ledger: {}", why));
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
  const auto sum = field<std::uint64_t>(trailer, 0, 16);
  if (!trailer.empty() || sum != fnv1a(body)) throw fail("checksum mismatch");
  ServiceLedger ledger;
  std::size_t line_no = 1;
  for (std::size_t start = 0; start < body.size();) {
    const auto nl = body.find('\n', start);
    auto line = body.substr(start, nl - start);
    start = nl + 1;
    ++line_no;
    const auto job = field<std::uint32_t>(line, line_no);
    Entry e;
    e.gpu_s = field<double>(line, line_no);
    e.run.start = field<std::int64_t>(line, line_no);
    e.run.seen = field<std::int64_t>(line, line_no);
    e.gpus = field<std::uint32_t>(line, line_no);
    e.wait_s = field<double>(line, line_no);
    e.wait.start = field<std::int64_t>(line, line_no);
    e.wait.seen = field<std::int64_t>(line, line_no);
    if (!line.empty()) throw fail(fmt::format("line {}: trailing data", line_no));
    ledger.jobs_[job] = e;
  }
  if (ledger.jobs_.size() != count) throw fail("entry count mismatch");
  return ledger;
}

std::uint32_t ServiceLedger::gpus(std::uint32_t job) const {
  const auto it = jobs_.find(job);
  return it == jobs_.end() ? 0 : it->second.gpus;
}

}  // namespace dl
