// dlrun after the bootstrap: runs the program, owns the signals Slurm sends to the step,
// and coordinates all ranks through rank 0 (checkpoint rounds, stop, failure, requeue).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/sysio.h"
#include "launcher/bootstrap.h"
#include "launcher/run_settings.h"

namespace dl {

// What dlrun was started with, to hand on to the program.
struct Inherited {
  std::vector<std::string> env;
  std::vector<int> fds;  // open descriptors, e.g. slurmstepd's
};

// Runs the command under supervision and returns dlrun's exit code. `signals` is a
// signalfd for the signals dlrun owns (blocked since dlrun started).
int supervise(const SupervisorOptions& options, const JobSettings& job, Bootstrap boot,
              Inherited inherited, sys::Fd signals);

}  // namespace dl
