// What the search driver (exp/search_driver.h) asks of Slurm, as one interface: dl-search
// talks to slurmctld through libslurm (libslurm_jobs), the driver's unit tests through a
// fake. Job ids are Slurm's, as text.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace dl::exp::search {

// A job of the calling user that Slurm still knows, finished ones included.
struct QueuedJob {
  std::string id;
  std::string name;
  std::string state;  // squeue's name of the job's state: PENDING, RUNNING, COMPLETED, ...
  // Pending after a requeue with a hold (scontrol requeuehold): the search's pause, or
  // dlrun's hold of a job whose restarts are used up.
  bool requeue_held = false;
};

// The outcome of sbatch: the job's id, or empty and why not.
struct Submitted {
  std::string id;
  std::string error;
};

class SlurmJobs {
 public:
  virtual ~SlurmJobs() = default;
  // sbatch with `options` (its own and the --dl-* ones) and the environment plus `env`
  // ("NAME=value").
  virtual Submitted submit(const std::vector<std::string>& options,
                           const std::vector<std::string>& env) = 0;
  // The calling user's jobs; throws when Slurm cannot be asked.
  virtual std::vector<QueuedJob> queue() = 0;
  // Each returns "" on success, else Slurm's reason.
  virtual std::string cancel(const std::string& job) = 0;
  virtual std::string hold(const std::string& job) = 0;          // a pending job
  virtual std::string requeue_hold(const std::string& job) = 0;  // a running one
  virtual std::string release(const std::string& job) = 0;
  // Seconds left until the time limit of a running job: infinity without a limit, -1
  // when it does not run (or Slurm cannot say).
  virtual double time_left(const std::string& job) = 0;
};

// The calling user's jobs in slurmctld (libslurm; sbatch for submit).
std::unique_ptr<SlurmJobs> libslurm_jobs();

}  // namespace dl::exp::search
