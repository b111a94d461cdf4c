// A Slurm job as dlrun names it and reads it: plain values, no libslurm (that is
// launcher/slurm_job.h's).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/deadline.h"

namespace dl::slurm {

// This job, or this array task: requeueing the array's id would requeue the whole
// array, so a task is addressed by its own job id (and by "ARRAY_TASK" in updates).
struct JobRef {
  std::uint32_t job_id = 0;
  std::optional<std::uint32_t> array_job_id;
  std::optional<std::uint32_t> array_task_id;

  std::string to_string() const;  // "123", or "100_3" for an array task
};

// From SLURM_JOB_ID, SLURM_ARRAY_JOB_ID and SLURM_ARRAY_TASK_ID; nullopt outside a job.
std::optional<JobRef> job_from_env();

struct JobInfo {
  std::optional<WallClock::time_point> end;  // nullopt: no time limit
  std::string comment;
  bool cancelled = false;  // scancel'ed: a stop signal must not requeue it
  bool batch = false;      // only batch jobs can be requeued
  bool running = false;    // RUNNING (not pending, completing or ended)
  std::string nodes;       // allocated nodes, e.g. "n[1-4]"
  std::string batch_host;  // the node running the batch script
  std::string std_out;     // a batch job's output and error files, patterns expanded
  std::string std_err;
  std::optional<WallClock::time_point> submitted;  // Slurm's submit time
  std::optional<WallClock::time_point> started;    // a running job's allocation start
  // Since when Slurm is preempting it (its preempt_time); nullopt when it is not.
  std::optional<WallClock::time_point> preempted_at;
};

}  // namespace dl::slurm
