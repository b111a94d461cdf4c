// dl-sim's metrics (Result): GPU use integrated over time while jobs arrive, and the
// job statistics from the jobs' outcomes.
#pragma once

#include <cstdint>
#include <set>
#include <vector>

#include "sched/sim/simulator.h"

namespace dl::sim {

// The integrals behind Result::gpu_util, idle_while_fit and idle_while_node_fit, over
// [first submit, last submit] (the whole run when every job is submitted at once).
class Usage {
 public:
  Usage() = default;  // no jobs
  Usage(double first_submit, double last_submit);

  void add_pending(std::uint32_t gpus);  // a job that waits for `gpus` GPUs
  void remove_pending(std::uint32_t gpus);
  void add_used(std::int64_t gpus);  // negative: released

  // Adds the state since the last call, with `free_gpus` idle, at most
  // `most_free_on_a_node` of them on one node, up to t (call before the clock moves on
  // to t).
  void account(double t, std::int64_t free_gpus, std::int64_t most_free_on_a_node);

  // The fractions of a cluster of `cluster_gpus` GPUs whose last job ended at `last_end`.
  double gpu_util(double cluster_gpus, double last_end) const;
  double idle_while_fit(double cluster_gpus, double last_end) const;
  double idle_while_node_fit(double cluster_gpus, double last_end) const;

 private:
  double capacity(double cluster_gpus, double last_end) const;
  std::multiset<std::uint32_t> pending_;  // the GPUs of every pending job
  std::int64_t used_ = 0;
  double begin_ = 0, end_ = 0, last_ = 0;
  double used_gpu_s_ = 0, idle_fit_gpu_s_ = 0, idle_node_fit_gpu_s_ = 0;
};

// Result's metrics from the jobs' outcomes (in submit order) and `usage` on a cluster
// of `cluster_gpus` GPUs: JCT average and percentiles, queue, makespan, gpu_util and
// idle_while_fit, idle_while_node_fit. The other fields are left to the simulator.
Result summarize(std::vector<JobOutcome> outcomes, const Usage& usage, double cluster_gpus);

}  // namespace dl::sim
