// The end of a run, decided: from what is known when it ends, what becomes of the job.
// Pure; launcher/run_end.h's conclude_run gathers the facts and carries the plan out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "launcher/job_control.h"
#include "launcher/restart.h"

namespace dl {

struct RunEndFacts {
  RunEnd end = RunEnd::completed;
  int code = 0;                               // the program's exit code, for a failure
  std::string why;                            // what ended the run
  std::optional<std::int64_t> ckpt_at_start;  // the step the run resumed from
  std::optional<std::int64_t> newest_ckpt;    // the newest checkpoint that verifies now
  RestartPolicy policy;
  RestartHistory history;                 // the job's restart history, or its restart count alone
  std::optional<CulpritVerdict> verdict;  // a failed run's culprit (judge_run_culprit)
  bool in_allocation = false;             // the job-level launcher can start the run again here
  std::string requeue_blocker;            // why the job cannot be requeued; empty: it can
};

enum class HistoryAction { keep, write, remove };

struct RunEndPlan {
  RunOutcome outcome;
  HistoryAction history_action = HistoryAction::keep;
  RestartHistory history;  // what HistoryAction::write stores
  bool requeue = false;    // requeue the job, held with `hold`
  bool hold = false;
  std::string reason;  // the restart guard's reason, for the log
  // A node that caused the job's last failures: the next run must not land on it.
  std::string exclude;
  std::string not_requeued;  // why a job due for the queue is not requeued
};

RunEndPlan plan_run_end(const RunEndFacts& f);

}  // namespace dl
