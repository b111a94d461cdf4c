// A job's history for dl-stats: rank 0's dlrun keeps one record per run (a start of the
// program: the first, each restart inside the allocation, each requeue) in a private
// directory of the user, rewritten as the run goes and when it ends; dl-stats joins
// them into where the job's time went and what its GPUs did. See man/dl-stats.1.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/deadline.h"
#include "launcher/gpu_usage.h"

namespace dl {

using WallTime = WallClock::time_point;

// What one GPU did during a run.
struct GpuTotals {
  std::uint64_t samples = 0;
  std::uint64_t util_sum = 0;  // sum of the samples' utilization, in %
  std::uint64_t mem_peak = 0;  // bytes
  std::uint64_t mem_total = 0;
};

struct RunRecord {
  std::string job;                    // "123", or "100_3" for an array task
  std::uint32_t run = 0;              // DL_RESTART_COUNT: the runs before this one
  std::uint32_t requeues = 0;         // SLURM_RESTART_COUNT: the allocation it ran in
  std::uint32_t gpus = 0;             // GPUs of the job (--dl-gpus)
  std::optional<WallTime> submitted;  // Slurm's submit time, as this run saw it
  std::optional<WallTime> allocated;  // when this run's allocation started
  WallTime started;                   // the program's start
  WallTime updated;                   // the record's last write
  std::optional<WallTime> ended;      // nullopt while it runs (or if dlrun was killed)
  std::string end;                    // how it ended: completed, requeued, failed, ...
  double ckpt_seconds = 0;            // time in checkpoint rounds
  std::uint32_t checkpoints = 0;
  std::optional<std::int64_t> step;  // the newest step the program reported
  std::map<std::pair<std::string, unsigned>, GpuTotals> gpu;  // by (node, minor)

  // A node's samples (one per GPU) add to its GPUs' totals.
  void add_samples(const std::string& node, const std::vector<GpuSample>& samples);
};

nlohmann::json to_json(const RunRecord& r);
// Throws dl::InputError naming what is missing or wrong.
RunRecord run_record_from_json(const nlohmann::json& j);

// Where the records live: $DL_STATS_DIR, else $HOME/.slurm-dl/jobs; each job in a
// directory of its own named by its id. Throws dl::InputError when neither is absolute.
std::string stats_root(const char* stats_dir, const char* home);

// Writes a run's record (run-<N>.json) into <root>/<job>/, made private to the user
// (core/private_dir.h), by a temporary file and rename(2): a reader never sees half a
// record. Throws dl::SystemError or dl::InputError.
void save_run_record(const std::string& root, const RunRecord& r);
// The job's records, by run; an unreadable record is skipped with its name in `skipped`.
std::vector<RunRecord> load_run_records(const std::string& root, const std::string& job,
                                        std::vector<std::string>* skipped);

// Where a job's time went, in seconds: from its submission to its end (or `now`), every
// second in exactly one part.
struct TimeSplit {
  double queued = 0;         // submission to the first allocation
  double requeue_waits = 0;  // a requeued run's end to the next allocation
  double starting = 0;       // an allocation's start to its first run's program
  double restarts = 0;       // a run's end to the next run in the same allocation
  double checkpointing = 0;  // checkpoint rounds
  double training = 0;       // the rest of the runs
  double total() const {
    return queued + requeue_waits + starting + restarts + checkpointing + training;
  }
};

struct GpuReportRow {
  std::string gpu;  // "n1/0"
  GpuTotals totals;
};

struct JobReport {
  std::string job;
  std::uint32_t runs = 0;
  std::uint32_t requeues = 0;         // allocations after the first
  std::uint32_t restarts_inside = 0;  // runs after the first of their allocation
  std::uint32_t gpus = 0;
  std::optional<std::int64_t> step;
  std::string end;  // the last run's end ("" while it runs)
  TimeSplit time;
  double gpu_hours_allocated = 0;
  std::optional<double> gpu_hours_used;  // nullopt: no GPU sample (no NVML)
  std::vector<GpuReportRow> per_gpu;
};

// What Slurm says of the job now: no longer known to it (or not asked), running, or
// pending again after a requeue.
enum class JobNow { gone, running, pending };

// `records` in any order. A run without an end ends at `now` when the job runs, else at
// its record's last update; a pending job's wait since its last run is a requeue wait.
// Throws dl::InputError for no record.
JobReport make_report(std::vector<RunRecord> records, WallTime now, JobNow state);

nlohmann::json to_json(const JobReport& r);
std::string format_report(const JobReport& r);

}  // namespace dl
