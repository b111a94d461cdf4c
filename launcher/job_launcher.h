// dlrun's job-level launcher: dlrun run in the batch script or in salloc (a job, no step)
// starts the ranks itself, as `srun --mpi=pmix dlrun ...`, and starts a new step after a
// failed one, inside the same allocation (see man/dlrun.1, "Restarts inside the
// allocation"). Each step is a fresh PMIx namespace, so MPI programs can MPI_Init again.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/sysio.h"
#include "launcher/recovery.h"
#include "launcher/supervisor.h"

namespace dl {

struct LauncherSettings {
  std::string dlrun;                    // this executable, for the steps
  std::vector<std::string> dlrun_args;  // dlrun's own options and the program, as given
  std::vector<std::string> env;         // the environment to start srun with
  JobSettings job;                      // job.job is set
  std::uint32_t max_stalled_restarts = 2;
  std::optional<RankRange> elastic;   // --dl-elastic, in ranks
  std::optional<std::uint32_t> gpus;  // --dl-gpus
};

// The entry point of a recovery: after a step (or a watchdog, which stops the step
// first) found the run failed, what to do next. Returns the next step's shape when the
// job restarts inside the allocation (nodes that failed already taken out of the job);
// nullopt when it does not (requeued, held, or not possible: `exit_code` says the
// launcher's exit code). `why` goes to the log and the job comment.
struct RecoveryOutcome {
  std::optional<StepShape> next;
  int exit_code = 0;
};

// Runs steps until one completes or is stopped, or the job cannot restart here; returns
// the launcher's exit code (the last step's, or the requeue's as dlrun's own codes).
// `signals`: the signalfd dlrun owns since its start.
int run_job_launcher(LauncherSettings settings, sys::Fd signals);

}  // namespace dl
