// The cost of one scheduling decision with 10,000 pending jobs on 1,000 nodes x 8
// GPUs: the main scheduler's choice for the head of the queue (its shape, a place
// for it, or the preemption victims that would make room), under the dl policy and,
// as the baseline measured in the same run, under Slurm's FIFO + backfill model.
// Also the parts the controller plugins run per job: shaping a gang against a
// 1,000-node partition, a site factor, and choosing victims among 1,000 jobs.
#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <utility>

#include "sched/gang.h"
#include "sched/preempt.h"
#include "sched/priority.h"
#include "sched/sim/simulator.h"

namespace {

using dl::sim::Policy;
constexpr std::uint32_t kNodes = 1000;
constexpr std::uint32_t kGpusPerNode = 8;
constexpr std::uint32_t kPending = 10000;

// Every node runs one 8-GPU job (half of them checkpointable) that started at 0;
// then 10,000 jobs of 1 to 16 GPUs arrive, one a second, and wait.
// With `queues`: the discretized policy (queues=4h:64h, starve=16, even shapes), under
// which every running job has crossed the first threshold, so the head looks for victims.
dl::sim::Simulator& loaded(Policy policy, bool queues = false) {
  static std::map<std::pair<Policy, bool>, std::unique_ptr<dl::sim::Simulator>> sims;
  auto& sim = sims[{policy, queues}];
  if (!sim) {
    std::vector<dl::TraceJob> trace;
    std::uint64_t id = 1;
    for (std::uint32_t k = 0; k < kNodes; ++k) {
      trace.push_back({id++, 0, 1e6, kGpusPerNode, "", k % 2 == 0, ""});
    }
    const std::uint32_t sizes[] = {16, 8, 4, 2, 1};
    for (std::uint32_t k = 0; k < kPending; ++k) {
      trace.push_back({id++, 1.0 + k, 3600, sizes[k % 5], "", k % 2 == 0, ""});
    }
    dl::sim::Options o;
    o.policy = policy;
    o.nodes = kNodes;
    o.gpus_per_node = kGpusPerNode;
    o.nodes_per_switch = 32;
    if (queues) {
      o.priority = dl::parse_priority_params("queues=4h:64h,starve=16");
      o.shapes = dl::sim::Shapes::even;
    }
    sim = std::make_unique<dl::sim::Simulator>(std::move(trace), o);
    sim->run_until(kPending + 0.5);
  }
  return *sim;
}

void BM_Decision(benchmark::State& state, Policy policy, bool queues) {
  auto& sim = loaded(policy, queues);
  for (auto _ : state) benchmark::DoNotOptimize(sim.decide());
  state.counters["pending"] = static_cast<double>(sim.pending());
  state.counters["running"] = static_cast<double>(sim.running());
}
BENCHMARK_CAPTURE(BM_Decision, dl, Policy::dl, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Decision, dl_queues, Policy::dl, true)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Decision, fifo_backfill, Policy::fifo_backfill, false)
    ->Unit(benchmark::kMicrosecond);

void BM_ShapeGang(benchmark::State& state) {
  dl::Capacity c;
  c.node_gpus.assign(kNodes, kGpusPerNode);
  for (std::uint32_t k = 0; k < kNodes; ++k) {
    if (k % 32 == 0) c.leaf_switches.emplace_back();
    c.leaf_switches.back().push_back(k);
  }
  const dl::Gang gang{64, dl::Placement::leaf_switch, std::nullopt, std::nullopt};
  for (auto _ : state) benchmark::DoNotOptimize(dl::fit_gang(gang, c, "gpu"));
}
BENCHMARK(BM_ShapeGang)->Unit(benchmark::kMicrosecond);

void BM_SiteFactor(benchmark::State& state) {
  const dl::PriorityParams p;
  double a = 1;
  for (auto _ : state) {
    benchmark::DoNotOptimize(dl::site_factor(a, 600, p));
    a += 1;
  }
}
BENCHMARK(BM_SiteFactor);

// 1,000 running jobs, one per node slot; the preemptor needs 8 GPUs on one node,
// which only the three jobs on node 0 together free.
class SlotsTrial : public dl::VictimTrial {
 public:
  void release(const dl::VictimCandidate& v) override { free_[v.id % 334] += v.gpus; }
  void take_back(const dl::VictimCandidate& v) override { free_[v.id % 334] -= v.gpus; }
  bool preemptor_fits() const override { return free_[0] >= 8; }
  void reset() { free_.assign(334, 0); }

 private:
  std::vector<std::uint32_t> free_ = std::vector<std::uint32_t>(334, 0);
};

void BM_ChooseVictims(benchmark::State& state) {
  std::vector<dl::VictimCandidate> candidates;
  for (std::uint64_t id = 0; id < 1000; ++id) {
    candidates.push_back({id, id % 334 == 0 ? 3u : 2u, static_cast<double>(id % 97), true});
  }
  SlotsTrial trial;
  for (auto _ : state) {
    trial.reset();
    benchmark::DoNotOptimize(dl::choose_victims(candidates, trial));
  }
}
BENCHMARK(BM_ChooseVictims)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
