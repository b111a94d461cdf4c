#include "sched/sim/generate.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/error.h"

namespace dl::sim {
namespace {

// Draws from the raw generator only, so traces do not depend on how a standard
// library implements its distributions.
class Draw {
 public:
  explicit Draw(std::uint64_t seed) : rng_(seed) {}
  double uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }  // [0, 1)
  std::uint32_t between(std::uint32_t lo, std::uint32_t hi) {
    return lo + static_cast<std::uint32_t>(uniform() * (hi - lo + 1));
  }
  double normal() {  // Box-Muller
    const double u = 1.0 - uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * M_PI * uniform());
  }
  double exponential(double rate) { return -std::log(1.0 - uniform()) / rate; }

 private:
  std::mt19937_64 rng_;
};

constexpr std::uint64_t kLargestJob = 32;
constexpr double kMedianS = 1800;
constexpr double kSigma = 1.5;
constexpr double kMinS = 60;
constexpr double kMaxS = 7 * 86400;

}  // namespace

std::vector<TraceJob> generate_ibm_ffdl(const IbmFfdlOptions& o) {
  if (!(o.load > 0 && o.load <= 10)) throw InputError("--load: expected a number in (0, 10]");
  if (o.jobs < 1) throw InputError("--jobs: expected at least 1");
  if (std::uint64_t{o.nodes} * o.gpus_per_node < kLargestJob) {
    throw InputError(
        "--nodes x --gpus-per-node: expected at least 32 GPUs (the largest FfDL job has 8 "
        "learners x 4 GPUs)");
  }
  Draw draw(o.seed);
  std::vector<TraceJob> jobs(o.jobs);
  double gpu_seconds = 0;
  for (std::uint32_t k = 0; k < o.jobs; ++k) {
    TraceJob& j = jobs[k];
    j.id = k + 1;
    j.gpus = draw.between(1, 8) * draw.between(1, 4);
    j.duration_s =
        std::round(std::clamp(kMedianS * std::exp(kSigma * draw.normal()), kMinS, kMaxS));
    j.checkpointable = draw.uniform() < 0.5;
    j.user = "u" + std::to_string(draw.between(1, 20));
    gpu_seconds += j.gpus * j.duration_s;
  }
  const double cluster = static_cast<double>(o.nodes) * o.gpus_per_node;
  const double rate = o.load * cluster / (gpu_seconds / o.jobs);
  double t = 0;
  for (auto& j : jobs) {
    j.submit_s = std::round(t);
    t += draw.exponential(rate);
  }
  return jobs;
}

}  // namespace dl::sim
