// What rank 0's coordinator (launcher/coordinator.h) reads and does outside itself: the
// program's progress, the Slurm job, the end of a run, the job-level launcher, tracking
// and the run's record for dl-stats. dlrun's implementation (launcher/dlrun_job_control.h)
// calls libslurm and the rest; the unit tests use a fake with a clock of their own.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/deadline.h"
#include "launcher/job_info.h"
#include "launcher/restart.h"
#include "launcher/run_stats.h"
#include "launcher/status.h"

namespace dl {

// What becomes of the job at the end of a run (conclude_run, launcher/run_end.h).
struct RunOutcome {
  int exit_code = 0;  // for every rank's dlrun
  JobPhase phase = JobPhase::completed;
  std::string detail;                       // for the status line
  std::optional<std::int64_t> newest_ckpt;  // the newest checkpoint now
  bool restart_here = false;                // restart inside the allocation
};

// How a run ended, for conclude_run.
struct RunEnding {
  RunEnd end = RunEnd::completed;
  int code = 0;                               // the program's exit code, for a failure
  std::string why;                            // what ended the run
  std::optional<std::int64_t> ckpt_at_start;  // the step the run resumed from
  // The node of a rank whose dlrun went away; empty otherwise.
  std::string lost_node;
  // dlrun's job-level launcher can start a failed run again inside the allocation.
  bool in_allocation = false;
  std::optional<CulpritVerdict> verdict;  // a failed run's culprit
};

// Shows a phase in the job's status line before the job goes back to the queue.
using ShowStatus = std::function<void(JobPhase, const std::string& detail)>;

// Where rank 0's program is, from its channel page; -1: not known yet.
struct ProgramProgress {
  std::int64_t step = -1;
  std::int64_t done_step = -1;  // the newest checkpoint it reported written
  std::optional<std::pair<std::int64_t, std::string>> metrics;  // step, its metrics line
};

class JobControl {
 public:
  virtual ~JobControl() = default;

  virtual WallClock::time_point wall_now() = 0;
  virtual ProgramProgress progress() = 0;

  // The Slurm job (throws when it cannot be read), and its comment; set_comment returns
  // false when the job has ended. status_comments: whether the status line goes there.
  virtual slurm::JobInfo load_job(const slurm::JobRef& job) = 0;
  virtual bool set_comment(const slurm::JobRef& job, const std::string& comment) = 0;
  virtual bool status_comments() = 0;

  // The end of a run and the verdict on a failed run's culprit (launcher/run_end.h).
  virtual RunOutcome conclude_run(const RunEnding& ending, const ShowStatus& show) = 0;
  virtual CulpritVerdict judge_culprit(const std::optional<Culprit>& culprit) = 0;
  // Under the job-level launcher: what made the step fail, and a node whose ranks were lost.
  virtual void report_culprit(const Culprit& culprit) = 0;
  virtual void report_lost_node(const std::string& node) = 0;
  // Under the job-level launcher: the exit code of a run that ended without a failure.
  virtual void report_run_end(int code) = 0;

  // Tracking (exp/trial.h): nothing outside an experiment's trial.
  virtual void record_event(const std::string& kind, const std::string& reason) = 0;
  virtual void record_checkpoint(std::int64_t step) = 0;
  virtual void record_metrics(std::int64_t step,
                              const std::vector<std::pair<std::string, double>>& values) = 0;
  virtual void record_logs(const std::vector<std::string>& paths) = 0;
  // The run's record for dl-stats; a failure is logged once and the run goes on without it.
  virtual void save_run_record(const RunRecord& record) = 0;
};

}  // namespace dl
