// dlrun started from inside a one-task step (a shell in `srun --pty --dl-gpus=2 bash`, or
// a script the step runs) rather than as the step's task itself: it then starts the
// ranks on this node itself, one per visible GPU, as `torchrun --nproc-per-node=gpu`
// does. This is the pure part: the rule that chooses the local launch, the number of
// ranks, each rank's layout and environment, and the launcher's exit code. The adapter
// that forks the ranks is launcher/local_ranks.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/launch.h"

namespace dl {

// What the environment says about where dlrun runs.
struct StepView {
  bool in_step = false;                     // SLURM_STEP_ID is set
  std::optional<std::uint32_t> step_tasks;  // SLURM_STEP_NUM_TASKS
  std::optional<std::int64_t> task_pid;     // SLURM_TASK_PID: the step's task on this node
  std::int64_t self_pid = 0;                // dlrun's own pid
  std::optional<std::string> visible_gpus;  // CUDA_VISIBLE_DEVICES
};

enum class LaunchMode {
  per_task,  // dlrun is one task of the step (srun --mpi=pmix dlrun): the PMIx bootstrap
  local,     // dlrun starts `ranks` ranks on this node itself
};

struct LaunchDecision {
  LaunchMode mode = LaunchMode::per_task;
  std::uint32_t ranks = 1;
  std::string why;  // one line for dlrun -v
};

// The rule: a local launch when dlrun runs inside a step (SLURM_STEP_ID) that has exactly
// one task (SLURM_STEP_NUM_TASKS=1) and dlrun is not that task itself (SLURM_TASK_PID is
// another process: a shell or a script the task runs). Then one rank per GPU in
// CUDA_VISIBLE_DEVICES, one rank when there is none. Everything else is the per-task
// path: `srun [-n N] dlrun` (dlrun is the task), a step of several tasks (each task is
// already a rank), and no step at all. Whether the step has a PMIx server does not
// matter: with cli_filter/dl the shell of `srun --pty` is a one-task PMIx step, and its
// one PMIx rank cannot be shared by several ranks.
LaunchDecision decide_launch(const StepView& view);

// The GPUs in CUDA_VISIBLE_DEVICES ("0,1", "GPU-uuid,..."); none for an empty value or
// Slurm's "NoDevFiles".
std::vector<std::string> visible_gpu_list(std::string_view cuda_visible_devices);

// Local rank `rank` of `ranks` on the one node of the launch.
RankLayout local_layout(std::uint32_t rank, std::uint32_t ranks);

// What each local rank's program gets besides program_env(): every PMIX_* variable of
// the step's task removed (the ranks are not PMIx clients of the step, and an MPI
// library that found them would take every rank for the step's rank 0), and on a
// terminal PYTHONUNBUFFERED=1 unless the user set it, so that the ranks' lines appear as
// they are printed although dlrun reads them through pipes to prefix them. CUDA_VISIBLE_DEVICES
// stays as the step has it: every rank sees all the step's GPUs and uses the one at
// LOCAL_RANK, as the per-task path and torchrun do.
EnvChanges local_rank_env(const std::vector<std::string>& base_env, bool on_terminal);

// The launcher's exit code from its ranks' (128 + N for a rank killed by signal N):
// rank 0's, which is the coordinator's decision for the whole run, unless rank 0 ended
// with 0 while another rank did not; then the first other rank's non-zero code.
int local_exit_code(const std::vector<int>& rank_codes);

}  // namespace dl
