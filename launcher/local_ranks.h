// The local launch's adapter (the rule is launcher/local_launch.h): dlrun forks one
// process per rank on this node, each of which goes on exactly as a task of
// `srun --mpi=pmix dlrun` does after its PMIx bootstrap (supervise(): rank 0's
// coordinator, checkpoint rounds, resume, the rank-prefixed output). Rank 0 chooses the
// rendezvous and hands it to the other ranks through pipes, which stand in for the PMIx
// fence (the step's secret stays out of every environment, argv and file). The process
// that forked them stays as the launcher: it passes on the signals it gets, waits for
// every rank and exits with their code.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/sysio.h"
#include "launcher/bootstrap.h"
#include "launcher/resume.h"
#include "launcher/supervisor.h"

namespace dl {

struct LocalStart {
  // In a rank's process: its bootstrap, to hand to supervise() as the PMIx path does.
  std::optional<Bootstrap> bootstrap;
  // In the launcher, once every rank has ended: dlrun's exit code.
  int exit_code = 0;
};

// Starts `ranks` ranks. Returns twice over: once in each rank's process (with its
// bootstrap, `inherited` adjusted for the rank) and once in the launcher when all have
// ended. `signals` is dlrun's signalfd; each rank keeps reading its own copy. Must be
// called while dlrun has no other thread (before anything starts one). Throws
// dl::SystemError when a rank cannot be forked (the ranks already started are stopped
// first) or, in a rank, when the rendezvous cannot be had.
// `in_rank` is called first thing in each rank's process (e.g. for the log prefix).
LocalStart start_local_ranks(std::uint32_t ranks, const std::string& node,
                             const ResumeRequest& resume, Inherited& inherited,
                             const sys::Fd& signals,
                             const std::function<void(std::uint32_t rank)>& in_rank);

}  // namespace dl
