// The driver of a hyperparameter search (`dl-search`, man/dl-search.1): the adapter that
// turns the searcher's operations (exp/searcher.h) into Slurm jobs and the jobs'
// outcomes, read back from the tracking store (exp/store.h), into the searcher's events.
// Its journal makes a driver killed at any instant carry on with no trial submitted
// twice and no result lost; a trial may continue to its next rung in the same job. Both
// are described in docs/design/search.md.
#pragma once

#include <string>

#include "exp/search_journal.h"
#include "exp/slurm_jobs.h"

namespace dl::exp::search {

struct DriveOptions {
  double poll_seconds = 0.5;
};

// Runs the search until it is complete or stopped, its jobs in `slurm`; returns the exit
// code.
int drive(const std::string& root, const std::string& experiment, const DriveOptions& options,
          SlurmJobs& slurm);

}  // namespace dl::exp::search
