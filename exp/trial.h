// The trial journal of a job's rank-0 dlrun: the events of each run (started, checkpoint
// written, stop requested, requeued, held, failed, completed). Tracking never stops
// training: these calls log a warning on failure and carry on, and are no-ops unless
// start_trial() found an experiment (--dl-experiment, DL_EXPERIMENT).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dl::exp {

// Where a run starts from, as far as dlrun knows: the checkpoint it resumes from (its
// step directory and step), the beginning (dlrun keeps the checkpoints and there is none
// yet), or unknown (the program keeps its own checkpoints).
struct RunStart {
  std::string resume_from;                  // the step directory, or empty
  std::optional<std::int64_t> resume_step;  // its step; -1: from the beginning
};

// Opens the journal of this run when DL_EXPERIMENT is set and records "run_started"
// (restart count, job id, where it starts from, hyperparameters from DL_HPARAMS when it
// holds a JSON object). What earlier runs reported past `start.resume_step` is
// recomputed by this run, which supersedes it (exp/store.h). Returns the variables to
// give rank 0's program so that report_metrics appends to a journal of its own:
// DL_EXP_JOURNALS (the directory) and DL_EXP_TRIAL.
std::vector<std::string> start_trial(std::uint32_t restart_count, const RunStart& start);

// An event of the run; `kind` is one of exp/journal.h's state_after() kinds.
void record_event(const std::string& kind, const std::string& reason,
                  std::optional<std::int64_t> step = std::nullopt);

// Figures dlrun measures itself (the GPUs' utilization and memory), as metrics of
// `step`, in dlrun's journal: shown and plotted like the program's.
void record_metrics(std::int64_t step, const std::vector<std::pair<std::string, double>>& values);

// The trial's log files (a batch job's output and error files); empty paths are skipped.
void record_logs(const std::vector<std::string>& paths);

// The checkpoint of `step` is durable in `ckpt_dir` (the job's checkpoint directory;
// empty when the program keeps its own), step directory `step_dir`. It counts as
// verified once a later run of the trial resumed from it (dlrun verifies before resuming).
void record_checkpoint(std::int64_t step, const std::string& ckpt_dir, const std::string& step_dir);

}  // namespace dl::exp
