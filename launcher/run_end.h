// The end of a run: what becomes of the job (finished, requeued, held, failed), told to
// Slurm, with the restart history kept for the next run. Rank 0's coordinator calls it;
// so does rank 1 when rank 0's dlrun itself is gone.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/restart.h"
#include "core/status.h"
#include "launcher/supervisor.h"

namespace dl {

struct RunOutcome {
  int exit_code = 0;  // for every rank's dlrun
  JobPhase phase = JobPhase::completed;
  std::string detail;                       // for the status line
  std::optional<std::int64_t> newest_ckpt;  // the newest checkpoint now
};

// Shows a phase in the job's status line before the job goes back to the queue.
using ShowStatus = std::function<void(JobPhase, const std::string& detail)>;

// `code` is the program's exit code for a failure; `why` says what ended the run;
// `ckpt_at_start` is the step the run resumed from.
RunOutcome conclude_run(const JobSettings& job, std::uint32_t max_stalled_restarts, RunEnd end,
                        int code, const std::string& why, std::optional<std::int64_t> ckpt_at_start,
                        const ShowStatus& show);

}  // namespace dl
