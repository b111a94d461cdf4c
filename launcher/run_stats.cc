#include "launcher/run_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "core/private_dir.h"
#include "core/sysio.h"

namespace dl {
namespace {

using sys::FileType;

constexpr int kFormat = 1;
constexpr std::size_t kMaxRecordBytes = 1 << 20;
constexpr std::size_t kMaxRuns = 10'000;

double seconds_of(WallTime t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}
WallTime time_of(double s) {
  return WallTime(
      std::chrono::duration_cast<WallClock::duration>(std::chrono::duration<double>(s)));
}
double between(WallTime from, WallTime to) {
  return std::max(0.0, std::chrono::duration<double>(to - from).count());
}

// "1:05:03", "0:00:07".
std::string hms(double seconds) {
  const auto s = static_cast<std::int64_t>(std::llround(seconds));
  return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
}

std::string gib(std::uint64_t bytes) {
  return fmt::format("{:.1f}", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
}

// A job's directory name: its id as Slurm spells it ("123", "100_3"), nothing else.
void check_job_name(const std::string& job) {
  const bool ok = !job.empty() && job.size() <= 32 &&
                  std::all_of(job.begin(), job.end(),
                              [](char c) { return (c >= '0' && c <= '9') || c == '_'; }) &&
                  job[0] != '_';
  if (!ok) throw InputError("job '" + job + "': expected a job id such as 123 or 100_3");
}

}  // namespace

void RunRecord::add_samples(const std::string& node, const std::vector<GpuSample>& samples) {
  for (const auto& s : samples) {
    GpuTotals& t = gpu[{node, s.minor}];
    ++t.samples;
    t.util_sum += s.util;
    t.mem_peak = std::max(t.mem_peak, s.mem_used);
    t.mem_total = s.mem_total;
  }
}

nlohmann::json to_json(const RunRecord& r) {
  nlohmann::json j = {{"format", kFormat},
                      {"job", r.job},
                      {"run", r.run},
                      {"requeues", r.requeues},
                      {"gpus", r.gpus},
                      {"started", seconds_of(r.started)},
                      {"updated", seconds_of(r.updated)},
                      {"end", r.end},
                      {"ckpt_seconds", r.ckpt_seconds},
                      {"checkpoints", r.checkpoints}};
  if (r.submitted) j["submitted"] = seconds_of(*r.submitted);
  if (r.allocated) j["allocated"] = seconds_of(*r.allocated);
  if (r.ended) j["ended"] = seconds_of(*r.ended);
  if (r.step) j["step"] = *r.step;
  auto& gpus = j["gpu"] = nlohmann::json::array();
  for (const auto& [key, t] : r.gpu) {
    gpus.push_back({{"node", key.first},
                    {"minor", key.second},
                    {"samples", t.samples},
                    {"util_sum", t.util_sum},
                    {"mem_peak", t.mem_peak},
                    {"mem_total", t.mem_total}});
  }
  return j;
}

RunRecord run_record_from_json(const nlohmann::json& j) {
  try {
    if (j.at("format").get<int>() != kFormat) {
      throw InputError(
          fmt::format("format {} (this dl-stats reads {})", j.at("format").get<int>(), kFormat));
    }
    RunRecord r;
    r.job = j.at("job").get<std::string>();
    r.run = j.at("run").get<std::uint32_t>();
    r.requeues = j.at("requeues").get<std::uint32_t>();
    r.gpus = j.at("gpus").get<std::uint32_t>();
    r.started = time_of(j.at("started").get<double>());
    r.updated = time_of(j.at("updated").get<double>());
    r.end = j.at("end").get<std::string>();
    r.ckpt_seconds = j.at("ckpt_seconds").get<double>();
    r.checkpoints = j.at("checkpoints").get<std::uint32_t>();
    if (j.contains("submitted")) r.submitted = time_of(j["submitted"].get<double>());
    if (j.contains("allocated")) r.allocated = time_of(j["allocated"].get<double>());
    if (j.contains("ended")) r.ended = time_of(j["ended"].get<double>());
    if (j.contains("step")) r.step = j["step"].get<std::int64_t>();
    for (const auto& g : j.at("gpu")) {
      GpuTotals t;
      t.samples = g.at("samples").get<std::uint64_t>();
      t.util_sum = g.at("util_sum").get<std::uint64_t>();
      t.mem_peak = g.at("mem_peak").get<std::uint64_t>();
      t.mem_total = g.at("mem_total").get<std::uint64_t>();
      r.gpu[{g.at("node").get<std::string>(), g.at("minor").get<unsigned>()}] = t;
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(e.what());
  }
}

std::string stats_root(const char* stats_dir, const char* home) {
  if (stats_dir && *stats_dir) {
    if (stats_dir[0] != '/') {
      throw InputError(std::string("DL_STATS_DIR=") + stats_dir + ": expected an absolute path");
    }
    return stats_dir;
  }
  if (!home || home[0] != '/') {
    throw InputError("neither DL_STATS_DIR nor HOME is set to an absolute path");
  }
  return sys::join(home, ".slurm-dl/jobs");
}

void save_run_record(const std::string& root, const RunRecord& r) {
  check_job_name(r.job);
  sys::make_dirs(root);
  const std::string dir = sys::join(root, r.job);
  ensure_private_dir(dir, {root});
  sys::write_file_durably(sys::join(dir, fmt::format("run-{}.json", r.run)),
                          to_json(r).dump() + "\n");
}

std::vector<RunRecord> load_run_records(const std::string& root, const std::string& job,
                                        std::vector<std::string>* skipped) {
  check_job_name(job);
  const std::string dir = sys::join(root, job);
  if (sys::file_type(dir) != FileType::directory) return {};
  const sys::Fd fd = sys::open_dir(dir);
  std::vector<RunRecord> out;
  for (const auto& name : sys::list_dir_fd(fd)) {
    if (name.rfind("run-", 0) != 0 || name.size() < 10 ||
        name.compare(name.size() - 5, 5, ".json") != 0) {
      continue;
    }
    try {
      const auto j = nlohmann::json::parse(sys::read_file_at(fd, name, kMaxRecordBytes));
      out.push_back(run_record_from_json(j));
    } catch (const std::exception& e) {
      if (skipped) skipped->push_back(name + ": " + e.what());
    }
    if (out.size() >= kMaxRuns) break;
  }
  std::sort(out.begin(), out.end(),
            [](const RunRecord& a, const RunRecord& b) { return a.run < b.run; });
  return out;
}

JobReport make_report(std::vector<RunRecord> records, WallTime now, JobNow state) {
  if (records.empty()) throw InputError("no run of the job is recorded");
  std::sort(records.begin(), records.end(),
            [](const RunRecord& a, const RunRecord& b) { return a.run < b.run; });
  JobReport rep;
  rep.job = records.front().job;
  rep.runs = static_cast<std::uint32_t>(records.size());
  const RunRecord& first = records.front();
  const RunRecord& last = records.back();
  auto end_of = [&](const RunRecord& r) {
    if (r.ended) return *r.ended;
    return state == JobNow::running && &r == &last ? std::max(now, r.updated) : r.updated;
  };
  // Submission: the first run's view (Slurm sets a requeued job's submit time anew).
  const WallTime submitted = first.submitted.value_or(first.allocated.value_or(first.started));
  const WallTime first_alloc =
      std::clamp(first.allocated.value_or(first.started), submitted, first.started);
  rep.time.queued = between(submitted, first_alloc);
  rep.time.starting = between(first_alloc, first.started);
  std::set<std::string> gpu_names;
  bool sampled = false;
  double used = 0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const RunRecord& r = records[i];
    if (i > 0) {
      const RunRecord& prev = records[i - 1];
      const WallTime prev_end = end_of(prev);
      if (r.requeues != prev.requeues) {
        ++rep.requeues;
        const WallTime alloc =
            std::clamp(r.allocated.value_or(r.started), prev_end, std::max(prev_end, r.started));
        rep.time.requeue_waits += between(prev_end, alloc);
        rep.time.starting += between(alloc, r.started);
      } else {
        ++rep.restarts_inside;
        rep.time.restarts += between(prev_end, r.started);
      }
    }
    const double ran = between(r.started, end_of(r));
    const double ckpt = std::min(ran, r.ckpt_seconds);
    rep.time.checkpointing += ckpt;
    rep.time.training += ran - ckpt;
    std::uint64_t samples = 0, util = 0;
    for (const auto& [key, t] : r.gpu) {
      samples += t.samples;
      util += t.util_sum;
      gpu_names.insert(key.first + "/" + std::to_string(key.second));
    }
    const auto gpus = std::max<std::size_t>(r.gpus, r.gpu.size());
    rep.gpus = std::max<std::uint32_t>(rep.gpus, static_cast<std::uint32_t>(gpus));
    const double hours = static_cast<double>(gpus) * ran / 3600.0;
    rep.gpu_hours_allocated += hours;
    if (samples > 0) {
      sampled = true;
      used += hours * (static_cast<double>(util) / static_cast<double>(samples)) / 100.0;
    }
    if (r.step) rep.step = std::max(rep.step.value_or(*r.step), *r.step);
  }
  if (sampled) rep.gpu_hours_used = used;
  rep.end = last.end;
  if (state == JobNow::pending && last.ended) {
    rep.time.requeue_waits += between(*last.ended, now);
    rep.end = "pending again";
  }
  // Each GPU over every run it was in.
  std::map<std::string, GpuTotals> per;
  for (const auto& r : records) {
    for (const auto& [key, t] : r.gpu) {
      GpuTotals& p = per[key.first + "/" + std::to_string(key.second)];
      p.samples += t.samples;
      p.util_sum += t.util_sum;
      p.mem_peak = std::max(p.mem_peak, t.mem_peak);
      p.mem_total = t.mem_total;
    }
  }
  for (const auto& [name, t] : per) rep.per_gpu.push_back({name, t});
  return rep;
}

nlohmann::json to_json(const JobReport& r) {
  nlohmann::json j = {{"job", r.job},
                      {"runs", r.runs},
                      {"requeues", r.requeues},
                      {"restarts_inside_allocation", r.restarts_inside},
                      {"gpus", r.gpus},
                      {"end", r.end},
                      {"seconds",
                       {{"queued", r.time.queued},
                        {"requeue_waits", r.time.requeue_waits},
                        {"starting", r.time.starting},
                        {"restarts", r.time.restarts},
                        {"checkpointing", r.time.checkpointing},
                        {"training", r.time.training},
                        {"total", r.time.total()}}},
                      {"gpu_hours_allocated", r.gpu_hours_allocated},
                      {"gpu_hours_used", nullptr}};
  if (r.gpu_hours_used) j["gpu_hours_used"] = *r.gpu_hours_used;
  if (r.step) j["step"] = *r.step;
  auto& gpus = j["per_gpu"] = nlohmann::json::array();
  for (const auto& g : r.per_gpu) {
    gpus.push_back({{"gpu", g.gpu},
                    {"util_avg", g.totals.samples ? static_cast<double>(g.totals.util_sum) /
                                                        static_cast<double>(g.totals.samples)
                                                  : 0.0},
                    {"samples", g.totals.samples},
                    {"mem_peak_bytes", g.totals.mem_peak},
                    {"mem_total_bytes", g.totals.mem_total}});
  }
  return j;
}

std::string format_report(const JobReport& r) {
  std::string out = fmt::format(
      "job {}: {} run{} ({} requeue{}, {} restart{} inside the allocation), {} GPU{}{}{}\n\n",
      r.job, r.runs, r.runs == 1 ? "" : "s", r.requeues, r.requeues == 1 ? "" : "s",
      r.restarts_inside, r.restarts_inside == 1 ? "" : "s", r.gpus, r.gpus == 1 ? "" : "s",
      r.step ? fmt::format(", step {}", *r.step) : "", r.end.empty() ? ", running" : ", " + r.end);
  const double total = r.time.total();
  auto row = [&](const char* name, double s) {
    out += fmt::format("{:<15}{:>10}  {:>3.0f}%\n", name, hms(s), total > 0 ? 100 * s / total : 0);
  };
  out += fmt::format("{:<15}{:>10}  {:>4}\n", "TIME", "H:MM:SS", "SHARE");
  row("queued", r.time.queued);
  row("requeue waits", r.time.requeue_waits);
  row("starting", r.time.starting);
  row("restarts", r.time.restarts);
  row("checkpointing", r.time.checkpointing);
  row("training", r.time.training);
  out += fmt::format("{:<15}{:>10}\n\n", "total", hms(total));
  if (r.gpu_hours_used) {
    out += fmt::format(
        "GPU-hours: {:.2f} allocated, {:.2f} used ({:.0f}%)\n", r.gpu_hours_allocated,
        *r.gpu_hours_used,
        r.gpu_hours_allocated > 0 ? 100 * *r.gpu_hours_used / r.gpu_hours_allocated : 0);
  } else {
    out += fmt::format("GPU-hours: {:.2f} allocated; used: not measured (no GPU sample)\n",
                       r.gpu_hours_allocated);
  }
  if (!r.per_gpu.empty()) {
    out += fmt::format("\n{:<12}{:>9}  {}\n", "GPU", "UTIL AVG", "MEMORY PEAK");
    for (const auto& g : r.per_gpu) {
      const double avg = g.totals.samples ? static_cast<double>(g.totals.util_sum) /
                                                static_cast<double>(g.totals.samples)
                                          : 0;
      out += fmt::format("{:<12}{:>8.0f}%  {}/{} GiB\n", g.gpu, avg, gib(g.totals.mem_peak),
                         gib(g.totals.mem_total));
    }
  }
  return out;
}

}  // namespace dl
