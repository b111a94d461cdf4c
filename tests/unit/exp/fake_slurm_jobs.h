// A Slurm for the search driver's unit tests (exp/slurm_jobs.h): jobs in memory that live
// by the looks at the queue (pending; running for kRunLooks looks; completed), a job that
// ends its rung writing its trial's metrics and checkpoint into the experiment's journals
// as dlrun and the training program would. A job given DL_SEARCH_DECISIONS (in-job
// continuation, client/decision_file.h) then waits for the driver's decision and runs
// the next rung or completes as told. It can kill the driver: at its Nth call it
// throws Killed, before or after doing what it was asked (an sbatch that queued the job
// before the driver died), so that a test can abandon the driver there and start another.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "exp/slurm_jobs.h"

namespace dl::exp::search {

// Thrown by FakeSlurmJobs to abandon the driver as `kill -9` would.
struct Killed {};

class FakeSlurmJobs : public SlurmJobs {
 public:
  static constexpr int kRunLooks = 3;
  struct Job {
    QueuedJob q;
    std::string trial;
    std::int64_t budget = 0;
    int looks_running = 0;  // looks at the queue while it ran its rung
    std::string decisions;  // DL_SEARCH_DECISIONS
    long long rung = 0;
    bool waiting = false;  // for the decision after its rung
    double lr = 0;
    bool held = false;  // by the user (hold), not by a requeue
  };

  // Jobs of experiment `experiment` write into `root`'s journals; the search's metric is
  // `metric`.
  FakeSlurmJobs(std::string root, std::string experiment, std::string metric);

  // The driver dies at call `n` (1: the first call from now), after doing the call's work
  // when `after`; 0: never.
  void kill_at(int n, bool after) {
    kill_at_ = n;
    kill_after_ = after;
    calls_ = 0;
  }
  // The driver dies at the first call from now at which `when` holds, before its work.
  void kill_when(std::function<bool()> when) { kill_when_ = std::move(when); }
  int calls() const { return calls_; }
  // Called at each look at the queue, once the jobs have lived their step (a user's
  // request at a given moment).
  void on_queue(std::function<void()> f) { on_queue_ = std::move(f); }

  const std::vector<Job>& jobs() const { return jobs_; }
  // The loss a trial with learning rate `lr` reports at `step`.
  static double loss(double lr, std::int64_t step);

  Submitted submit(const std::vector<std::string>& options,
                   const std::vector<std::string>& env) override;
  std::vector<QueuedJob> queue() override;
  std::string cancel(const std::string& job) override;
  std::string hold(const std::string& job) override;
  std::string requeue_hold(const std::string& job) override;
  std::string release(const std::string& job) override;
  double time_left(const std::string& job) override;

 private:
  // Counts a call; throws Killed at the chosen one (before its work unless kill_after_).
  void enter();
  void leave();
  Job* find(const std::string& id);
  void run(Job& job);   // writes the rung's metrics and its checkpoint
  void live(Job& job);  // one step of the job's life

  std::string root_, experiment_, metric_;
  std::vector<Job> jobs_;
  int next_id_ = 100;
  int kill_at_ = 0;
  bool kill_after_ = false;
  int calls_ = 0;
  std::function<bool()> kill_when_;
  std::function<void()> on_queue_;
};

}  // namespace dl::exp::search
