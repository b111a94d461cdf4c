// The slurm-dl client API for training programs run by dlrun (`dlrun ./train` in a batch
// script). The same verbs exist in Python (`import slurm_dl`).
//
//   for (std::int64_t step = first; step < steps; ++step) {
//     train_one_step();
//     dl::report_step(step);
//     if (dl::should_checkpoint()) {
//       save(step);                 // e.g. with dl::ckpt
//       dl::checkpoint_done(step);
//     }
//   }
//
// dlrun asks for a checkpoint when the job is preempted, reaches its deadline, gets a
// stop signal, or every --dl-ckpt-every. All ranks agree on the step: should_checkpoint()
// becomes true at the same step on every rank, so call report_step() with the same steps
// on every rank. When the checkpoint ends the run, dlrun stops the program after
// checkpoint_done(), or once the grace time is over.
//
// Outside dlrun every call is a cheap no-op: should_checkpoint() is false and
// resume_path() reads DL_RESUME_FROM. Calls are safe from several threads and from
// child processes (fork or spawn); report_step and report_metrics from one process per
// rank. Failures (an unreadable DL_CLIENT_FILE, a negative step, a bad metric name)
// throw std::runtime_error or std::invalid_argument.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace dl {

// True when this rank should write its checkpoint now, at the step it last reported.
// Stays true until checkpoint_done().
bool should_checkpoint();

// The step the program has just finished (>= 0). While a checkpoint round is being
// agreed, this waits (typically milliseconds) until the step is known, so that no rank
// runs past it.
void report_step(std::int64_t step);

// Metrics for the log and the job's status line, e.g. {{"loss", 0.31}}. Names are
// letters, digits and "_.-/:"; values finite. Under dlrun with --dl-experiment, rank 0's
// calls are each recorded once in the experiment's store (a journal file of this
// process's own; `dl-exp metrics EXP`).
void report_metrics(std::int64_t step, const std::map<std::string, double>& metrics);

// The newest checkpoint that verifies (DL_RESUME_FROM), or nullopt for a fresh start.
std::optional<std::string> resume_path();

// The checkpoint of `step` is durable (on every rank's side: call it after your save
// returned). Also call it for checkpoints the program writes on its own schedule: dlrun
// shows the newest in the job's status line.
void checkpoint_done(std::int64_t step);

// For a trial of a hyperparameter search (dl-search): its hyperparameters as the JSON
// object text dl-search put in DL_HPARAMS ("{}" when unset), and the step this run ends
// at (DL_MAX_STEPS, the current rung's budget: run steps up to max_steps() - 1,
// checkpoint, exit 0), or nullopt outside a search. A bad DL_MAX_STEPS throws
// std::invalid_argument.
// In a job that dl-search continued to a later rung (below), max_steps() is that rung's.
std::string hparams_json();
std::optional<std::int64_t> max_steps();

// After the rung's last step is reported and its checkpoint done: whether dl-search
// continues this job to the next rung (asha promoted it at once, continue_in_job): the
// next rung's budget (train on from memory, checkpoint, ask again), or nullopt: exit as
// usual. Waits DL_SEARCH_WAIT seconds at most; without a decision by then the trial
// decides "end" itself, atomically, and dl-search runs the rung as a new job resuming
// from the checkpoint. nullopt at once outside a search or after its last rung.
std::optional<std::int64_t> next_max_steps();

}  // namespace dl
