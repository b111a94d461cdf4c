#include "sched/ledger.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/spec.h"
#include "sched/priority.h"

namespace dl {
namespace {

constexpr std::string_view kHeaderV1 = "slurm-dl service-ledger 1";
constexpr std::string_view kHeaderV2 = "slurm-dl service-ledger 2";
constexpr std::string_view kHeaderV3 = "slurm-dl service-ledger 3";
constexpr std::string_view kHeader = "slurm-dl service-ledger 4";

// The owner of the finished jobs a version 3 file lists (it did not say): they weigh
// as one user until they leave the window.
constexpr std::uint32_t kUnknownUser = 0xffffffff;

// Paths may hold any byte but NUL: written as lowercase hex, "-" when empty.
std::string hex(std::string_view s) {
  if (s.empty()) return "-";
  std::string out;
  out.reserve(2 * s.size());
  for (const unsigned char c : s) out += fmt::format("{:02x}", c);
  return out;
}

std::string unhex(std::string_view word, std::size_t line_no) {
  if (word == "-") return {};
  const auto bad = [&] {
    return InputError(fmt::format("service ledger line {}: bad field '{}'", line_no, word));
  };
  if (word.empty() || word.size() % 2 != 0) throw bad();
  std::string out;
  for (std::size_t i = 0; i < word.size(); i += 2) {
    unsigned v = 0;
    const auto r = std::from_chars(word.data() + i, word.data() + i + 2, v, 16);
    if (r.ec != std::errc() || r.ptr != word.data() + i + 2 || v == 0 ||
        std::isupper(static_cast<unsigned char>(word[i])) ||
        std::isupper(static_cast<unsigned char>(word[i + 1]))) {
      throw bad();
    }
    out += static_cast<char>(v);
  }
  return out;
}

std::string_view word_of(std::string_view& line) {
  const auto sp = line.find(' ');
  const auto word = line.substr(0, sp);
  line = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
  return word;
}

// The job key a --dl-resume-from path ends in: resolve_resume_from makes a job key
// <root>/<user>/<key>, the default directory of that job.
std::string_view key_tail(std::string_view path) {
  const auto slash = path.rfind('/');
  if (slash == std::string_view::npos) return {};
  const auto tail = path.substr(slash + 1);
  return is_ckpt_job_key(tail) ? tail : std::string_view();
}

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
  s.attained =
      e.carried + e.gpu_s + (e.run.start != 0 ? span_seconds(e.run.start, now) * e.gpus : 0);
  s.waited = e.wait_s + (e.wait.start != 0 ? span_seconds(e.wait.start, now) : 0);
  s.gpus = e.gpus;
  return s;
}

double ServiceLedger::decayed(const Account& a, std::int64_t now) const {
  const double age = static_cast<double>(std::max<std::int64_t>(now - a.at, 0));
  return a.gpu_s * std::exp2(-age / carry_.half_life_s);
}

double ServiceLedger::carried(const Work& work, std::int64_t now) const {
  double best = 0;
  const auto look = [&](std::string_view key) {
    if (key.empty()) return;
    const auto it = accounts_.find({work.uid, std::string(key)});
    if (it != accounts_.end()) best = std::max(best, decayed(it->second, now));
  };
  look(work.own);
  look(work.resume);
  look(key_tail(work.resume));
  return best;
}

void ServiceLedger::deposit(std::uint32_t uid, const std::string& key, double gpu_s,
                            std::int64_t now) {
  if (key.empty()) return;
  const auto [it, added] = accounts_.try_emplace({uid, key});
  Account& a = it->second;
  if (!added && decayed(a, now) >= gpu_s) return;
  a = {gpu_s, now};
  if (accounts_.size() <= carry_.max_accounts) return;
  // Over the bound: the smallest account goes (rare; a walk over all of them).
  auto smallest = accounts_.begin();
  for (auto i = accounts_.begin(); i != accounts_.end(); ++i) {
    if (decayed(i->second, now) < decayed(smallest->second, now)) smallest = i;
  }
  accounts_.erase(smallest);
}

// Its service (carried in and its own) into the accounts of its checkpoint directory
// and of the one it resumed from: a job that resumes from the same place again, or
// writes into the same directory, continues the same work.
void ServiceLedger::carry_out(Entry& e, std::int64_t now) {
  if (!e.work || e.carried_out) return;
  e.carried_out = true;
  const double total = service(e, now).attained;
  if (total < carry_.floor_gpu_s) return;
  deposit(e.work->uid, e.work->own, total, now);
  deposit(e.work->uid, e.work->resume, total, now);
  const auto tail = key_tail(e.work->resume);
  if (!tail.empty()) deposit(e.work->uid, std::string(tail), total, now);
}

void ServiceLedger::start_entry(Entry& e, const WorkOf* work_of, std::int64_t now) {
  if (!work_of) return;
  auto work = (*work_of)();
  if (!work) return;
  e.carried = accounts_.empty() ? 0 : carried(*work, now);
  e.work = std::make_shared<const Work>(std::move(*work));
}

void ServiceLedger::expire(std::int64_t now) {
  for (auto it = accounts_.begin(); it != accounts_.end();) {
    it = decayed(it->second, now) < carry_.floor_gpu_s ? accounts_.erase(it) : std::next(it);
  }
}

Service ServiceLedger::observe(std::uint32_t job, const JobSnapshot& s, std::int64_t now,
                               const WorkOf* work_of) {
  last_now_ = now;
  if (s.running) {
    // Where Slurm enforces limits it clears accrue_time when the job starts; its
    // BeginTime is then when it became eligible (Slurm sets it when a dependency ends).
    const std::int64_t eligible = s.accrue != 0 ? s.accrue : std::max(s.submit, s.begin);
    const auto [it, added] = jobs_.try_emplace(job);
    Entry& e = it->second;
    if (added && eligible != 0) e.wait_s = span_seconds(eligible, s.start);
    if (added) start_entry(e, work_of, now);
    mark(e);
    run(e, s.start, s.gpus, now);
    return service(e, now);
  }
  if (s.pending && !s.completing && !s.held) {
    // A pending job waits from when Slurm counts its age (accrue_time), not from its
    // submission: a wait on a dependency (BeginTime 0 until it ends) is no wait.
    if (!s.requeued) {
      // A job that continues carried work waits with that service; any other has none
      // (and no entry: most of a long queue is such jobs).
      const auto it = jobs_.find(job);
      if (it == jobs_.end()) {
        if (!work_of || accounts_.empty()) {
          return {0, s.accrue != 0 ? span_seconds(s.accrue, now) : 0, 0};
        }
        Entry fresh;
        start_entry(fresh, work_of, now);
        if (fresh.carried == 0) return {0, s.accrue != 0 ? span_seconds(s.accrue, now) : 0, 0};
        jobs_.emplace(job, std::move(fresh));
      }
    }
    const auto [it, added] = jobs_.try_emplace(job);
    Entry& e = it->second;
    if (added) start_entry(e, work_of, now);
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
  if (it == jobs_.end()) {
    // It ran between two samples: its one run, as Slurm shows it.
    if (s.finished && s.start != 0 && s.end > s.start && s.gpus > 0) {
      finished_.add({job, s.uid, static_cast<double>(s.end - s.start) * s.gpus, now});
    }
    return {};
  }
  Entry& e = it->second;
  mark(e);
  stop(e, s.finished || s.completing ? s.end : 0);
  const Service now_service = service(e, now);
  if (s.finished) {
    carry_out(e, now);
    if (e.gpus > 0) finished_.add({job, s.uid, now_service.attained, now});
  }
  return now_service;
}

void ServiceLedger::end_sweep() {
  if (seen_ == jobs_.size()) return;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (it->second.sweep == sweep_) {
      ++it;
      continue;
    }
    carry_out(it->second, last_now_);
    it = jobs_.erase(it);
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
    body += fmt::format("{} {:.0f} {} {} {} {:.0f} {} {} {:.0f}", job, e.gpu_s, e.run.start,
                        e.run.seen, e.gpus, e.wait_s, e.wait.start, e.wait.seen, e.carried);
    if (e.work) {
      body += fmt::format(" {} {} {}\n", e.work->uid, hex(e.work->own), hex(e.work->resume));
    } else {
      body += " -\n";
    }
  }
  for (const auto& [key, a] : accounts_) {
    body += fmt::format("a {} {:.0f} {} {}\n", key.first, a.gpu_s, a.at, hex(key.second));
  }
  for (const auto& f : finished_.jobs()) {
    body += fmt::format("f {} {} {:.0f} {}\n", f.id, f.user, f.gpu_s, f.end);
  }
  return fmt::format("{}\n{}end {} {} {} {:016x}\n", kHeader, body, jobs_.size(), accounts_.size(),
                     finished_.size(), fnv1a(body));
}

// Reads versions 4, 3 (finished jobs without their owner or end), 2 (no finished jobs)
// and 1 (no carried service, no accounts either),
// which an upgraded slurmctld finds in its StateSaveLocation.
ServiceLedger ServiceLedger::parse(std::string_view text) {
  const auto fail = [](const std::string& why) {
    return InputError(fmt::format("service ledger: {}", why));
  };
  int version = 0;
  for (const auto& [v, header] :
       {std::pair{1, kHeaderV1}, {2, kHeaderV2}, {3, kHeaderV3}, {4, kHeader}}) {
    if (text.substr(0, header.size() + 1) == fmt::format("{}\n", header)) version = v;
  }
  if (version == 0) throw fail("missing header");
  const bool v1 = version == 1;
  text.remove_prefix(text.find('\n') + 1);
  const auto trailer_at = text.rfind("end ");
  if (trailer_at == std::string_view::npos || (trailer_at != 0 && text[trailer_at - 1] != '\n') ||
      text.back() != '\n') {
    throw fail("missing trailer (torn write?)");
  }
  const auto body = text.substr(0, trailer_at);
  auto trailer = text.substr(trailer_at + 4, text.size() - trailer_at - 5);
  const auto count = field<std::size_t>(trailer, 0);
  const auto account_count = v1 ? 0 : field<std::size_t>(trailer, 0);
  const auto finished_count = version < 3 ? 0 : field<std::size_t>(trailer, 0);
  const auto sum = field<std::uint64_t>(trailer, 0, 16);
  if (!trailer.empty() || sum != fnv1a(body)) throw fail("checksum mismatch");
  ServiceLedger ledger;
  std::size_t line_no = 1;
  std::size_t finished_read = 0;
  // Version 3 did not say when its finished jobs ended: the last time the file knows
  // of (its entries and accounts come first).
  std::optional<std::int64_t> v3_end;
  const auto saved_at = [&] {
    if (!v3_end) {
      v3_end = 0;
      for (const auto& [job, e] : ledger.jobs_)
        v3_end = std::max({*v3_end, e.run.seen, e.wait.seen});
      for (const auto& [key, a] : ledger.accounts_) v3_end = std::max(*v3_end, a.at);
    }
    return *v3_end;
  };
  for (std::size_t start = 0; start < body.size();) {
    const auto nl = body.find('\n', start);
    auto line = body.substr(start, nl - start);
    start = nl + 1;
    ++line_no;
    if (version >= 3 && line.substr(0, 2) == "f ") {
      line.remove_prefix(2);
      FinishedJob f;
      f.id = field<std::uint32_t>(line, line_no);
      f.user = version == 3 ? kUnknownUser : field<std::uint32_t>(line, line_no);
      f.gpu_s = field<double>(line, line_no);
      f.end = version == 3 ? saved_at() : field<std::int64_t>(line, line_no);
      if (!line.empty() || ++finished_read > kAdaptWindow || !ledger.finished_.add(f)) {
        throw fail(fmt::format("line {}: bad finished job", line_no));
      }
      continue;
    }
    if (finished_read > 0) throw fail(fmt::format("line {}: out of order", line_no));
    if (!v1 && line.substr(0, 2) == "a ") {
      line.remove_prefix(2);
      const auto uid = field<std::uint32_t>(line, line_no);
      Account a;
      a.gpu_s = field<double>(line, line_no);
      a.at = field<std::int64_t>(line, line_no);
      auto key = unhex(word_of(line), line_no);
      if (key.empty() || !line.empty()) throw fail(fmt::format("line {}: bad account", line_no));
      if (!ledger.accounts_.emplace(std::make_pair(uid, std::move(key)), a).second) {
        throw fail(fmt::format("line {}: duplicate account", line_no));
      }
      continue;
    }
    const auto job = field<std::uint32_t>(line, line_no);
    Entry e;
    e.gpu_s = field<double>(line, line_no);
    e.run.start = field<std::int64_t>(line, line_no);
    e.run.seen = field<std::int64_t>(line, line_no);
    e.gpus = field<std::uint32_t>(line, line_no);
    e.wait_s = field<double>(line, line_no);
    e.wait.start = field<std::int64_t>(line, line_no);
    e.wait.seen = field<std::int64_t>(line, line_no);
    if (!v1) {
      e.carried = field<double>(line, line_no);
      if (line == "-") {
        line = {};
      } else {
        Work w;
        w.uid = field<std::uint32_t>(line, line_no);
        w.own = unhex(word_of(line), line_no);
        w.resume = unhex(word_of(line), line_no);
        e.work = std::make_shared<const Work>(std::move(w));
      }
    }
    if (!line.empty()) throw fail(fmt::format("line {}: trailing data", line_no));
    if (!ledger.accounts_.empty() || !ledger.jobs_.emplace(job, std::move(e)).second) {
      throw fail(fmt::format("line {}: out of order", line_no));
    }
  }
  if (ledger.jobs_.size() != count || ledger.accounts_.size() != account_count ||
      finished_read != finished_count) {
    throw fail("entry count mismatch");
  }
  return ledger;
}

std::uint32_t ServiceLedger::gpus(std::uint32_t job) const {
  const auto it = jobs_.find(job);
  return it == jobs_.end() ? 0 : it->second.gpus;
}

}  // namespace dl
