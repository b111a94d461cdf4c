// Recovery inside the allocation: what dlrun's job-level launcher (dlrun run in the
// batch script or in salloc, outside any step) does when one of its srun steps ends.
// Pure: the launcher's adapter (launcher/job_launcher) supplies srun's exit code, the
// job's nodes and which of them answer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/restart.h"

namespace dl {

// The exit code every rank's dlrun ends a step with when a rank failed and the step
// runs under the job-level launcher: the launcher decides (restart guard, nodes) and
// starts the next step. EX_PROTOCOL: nothing else in the step uses it.
inline constexpr int kExitRestartStep = 76;

// How an srun step of the launcher ended, from srun's exit code (the highest of its
// tasks', or 128 + a signal).
enum class StepEnd {
  completed,  // 0: every rank completed
  stopped,    // 75 (checkpointed, requeued) or 143 (stopped, not requeued): Slurm's turn
  failed,     // anything else: a rank failed or was lost, or the step could not start
};
StepEnd classify_step_exit(int code);

// The job's shape as the launcher started it.
struct StepShape {
  std::vector<std::string> nodes;  // in the job's order
  std::uint32_t tasks_per_node = 1;
};

// The world sizes (ranks) the job accepts; from --dl-elastic=MIN:MAX (GPUs, one rank each).
struct RankRange {
  std::uint32_t min = 0;
  std::uint32_t max = 0;
};

struct RecoveryPlan {
  // Restart inside the allocation on `shape`; otherwise requeue the job (without the
  // dead nodes) as dlrun does without the launcher.
  bool in_allocation = false;
  StepShape shape;
  std::vector<std::string> dead;  // nodes to take out of the job (in `shape`'s order)
  std::string why;                // one line: what happens and why
};

// After a failed step: `dead` are the nodes of `shape` that have failed (their slurmd
// does not answer). No dead node: the same shape again. Dead nodes: the remaining
// nodes when the job is elastic and `remaining x tasks_per_node` ranks are within
// `elastic`; otherwise a requeue. The batch host cannot be among the dead (the
// launcher runs there).
// `what` says why the nodes leave ("failed"; "is excluded" for a node that caused the
// job's last failures, see judge_culprit).
RecoveryPlan plan_recovery(const StepShape& shape, const std::vector<std::string>& dead,
                           std::optional<RankRange> elastic, std::string_view what = "failed");

// The one message a step's dlrun sends the launcher: "rank(s) on `node` lost", over a
// TCP connection to the launcher's port (DL_LAUNCHER_ADDR, DL_LAUNCHER_PORT), with the
// launcher's key (DL_LAUNCHER_KEY). The launcher checks that the node's slurmd does not
// answer before it acts, so a wrong report costs one check.
std::string format_lost_node(std::string_view key, std::string_view node);
// The node of a valid report with `key`; nullopt for anything else.
std::optional<std::string> parse_lost_node(std::string_view line, std::string_view key);

// The other message: what made the step fail ("CULPRIT <key> <node> <rank> <kind>"),
// sent by rank 0's dlrun (rank 1's when rank 0's is gone) before the step's ranks end,
// so that the launcher can exclude a node that caused the job's last two failures.
std::string format_culprit(std::string_view key, const Culprit& culprit);
// The culprit of a valid report with `key`; nullopt for anything else.
std::optional<Culprit> parse_culprit(std::string_view line, std::string_view key);

// The third: how rank 0 ended a run that did not fail ("ENDED <key> <code>", the exit
// code every rank's dlrun gets: 0, 75 or 143), sent before the ranks end. The step's own
// exit code can say otherwise: once one rank's program is gone, another one's collective
// fails, and an MPI program aborts the whole step (Open MPI's MPI_Abort, exit code 1).
std::string format_run_end(std::string_view key, int code);
// The exit code of a valid report with `key`; nullopt for anything else.
std::optional<int> parse_run_end(std::string_view line, std::string_view key);

// srun's options for a step on `shape` after nodes were taken out of the job:
// "-N<n>", "-n<n x tasks>", "--ntasks-per-node=<tasks>", "--nodelist=<a,b>".
std::vector<std::string> step_shape_options(const StepShape& shape);

// Slurm's compressed form of SLURM_TASKS_PER_NODE ("2(x3)", "2(x2),1") to the tasks on
// the first node; nullopt when `text` is not that form.
std::optional<std::uint32_t> first_node_tasks(const std::string& text);

}  // namespace dl
