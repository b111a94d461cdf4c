// The seed workload of shared/workloads/README.md (IBM FfDL/DLaaS, "PACK vs SPREAD"):
// a generator for traces at a chosen offered load. The talk gives the job sizes; the
// rest is this generator's choice, stated here and in dl-sim(1):
//   learners per job     uniform 1..8 (mean 4.5, as published)
//   GPUs per learner     uniform 1..4 (mean 2.5, as published); num_gpu = the product
//   duration             log-normal, median 30 min, sigma 1.5 (mean ~1.5 h, a long
//                        tail as in published DL cluster traces), clipped to 1 min..7 d,
//                        whole seconds
//   arrivals             Poisson, rate = load x cluster GPUs / mean(num_gpu x duration)
//                        over the generated jobs, so the offered load is `load`
//   checkpointable       each job with probability 1/2
//   user                 u1..u20, uniform
// Everything is drawn from one 64-bit Mersenne Twister seeded with `seed`, so a seed
// gives the same trace on every machine.
#pragma once

#include <cstdint>
#include <vector>

#include "sched/trace.h"

namespace dl::sim {

struct IbmFfdlOptions {
  double load = 0.9;
  std::uint64_t seed = 1;
  std::uint32_t jobs = 4000;
  std::uint32_t nodes = 100;  // the published cluster: 100 machines x 4 GPUs
  std::uint32_t gpus_per_node = 4;
};

// Throws InputError for a load outside (0, 10], no jobs, or a cluster smaller than the
// largest job (32 GPUs).
std::vector<TraceJob> generate_ibm_ffdl(const IbmFfdlOptions& options);

}  // namespace dl::sim
