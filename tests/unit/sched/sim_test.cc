#include <gtest/gtest.h>

#include <numeric>

#include "core/error.h"
#include "sched/sim/generate.h"
#include "sched/sim/simulator.h"

namespace dl::sim {
namespace {

Options cluster(Policy policy, std::uint32_t nodes, std::uint32_t gpus) {
  Options o;
  o.policy = policy;
  o.nodes = nodes;
  o.gpus_per_node = gpus;
  o.limit_factor = 1;  // time limit = duration, in whole minutes
  return o;
}

TraceJob job(std::uint64_t id, double submit, double duration, std::uint32_t gpus,
             bool checkpointable = false) {
  return {id, submit, duration, gpus, "", checkpointable};
}

// The FfDL gang check: 8 GPUs, four jobs of 4 one-GPU learners: two run, two wait,
// never a partial gang.
TEST(Sim, GangsOfFourOnEightGpusTwoRunTwoWait) {
  for (const auto policy : {Policy::fifo_backfill, Policy::dl}) {
    std::vector<TraceJob> trace;
    for (std::uint64_t id = 1; id <= 4; ++id) trace.push_back(job(id, 0, 100, 4));
    Simulator sim(trace, cluster(policy, 4, 2));
    sim.run_until(50);
    EXPECT_EQ(sim.running(), 2u) << to_string(policy);
    EXPECT_EQ(sim.pending(), 2u) << to_string(policy);
    const Result r = sim.run();
    EXPECT_EQ(r.jobs, 4u);
    EXPECT_DOUBLE_EQ(r.avg_jct_s, 150);
    EXPECT_DOUBLE_EQ(r.makespan_s, 200);
    EXPECT_DOUBLE_EQ(r.gpu_util, 1.0);
  }
}

TEST(Sim, FifoSplitsSmallGangsTheDlPolicyNever) {
  const std::vector<TraceJob> trace = {job(1, 0, 100, 3), job(2, 0, 100, 3)};
  EXPECT_EQ(simulate(trace, cluster(Policy::fifo_backfill, 2, 4)).split_small_jobs, 1u);
  EXPECT_EQ(simulate(trace, cluster(Policy::dl, 2, 4)).split_small_jobs, 0u);
}

TEST(Sim, FifoBackfillsOnlyWhatEndsBeforeTheReservation) {
  // A holds 2 of 4 GPUs until 1000; B needs all 4 and waits; C fits in the other 2.
  const std::vector<TraceJob> fits = {job(1, 0, 1000, 2), job(2, 10, 100, 4), job(3, 20, 100, 2)};
  const Result r = simulate(fits, cluster(Policy::fifo_backfill, 1, 4));
  // C starts at the first backfill pass (t=30) and ends at 130; B starts at 1000.
  EXPECT_DOUBLE_EQ(r.avg_jct_s, (1000 + 1090 + 110) / 3.0);
  const std::vector<TraceJob> late = {job(1, 0, 1000, 2), job(2, 10, 100, 4), job(3, 20, 2000, 2)};
  const Result w = simulate(late, cluster(Policy::fifo_backfill, 1, 4));
  // C would delay B: it waits for B (1000..1100) and ends at 3100.
  EXPECT_DOUBLE_EQ(w.avg_jct_s, (1000 + 1090 + 3080) / 3.0);
}

TEST(Sim, DlPreemptsTheCheckpointableJobThatHadMoreServiceAndCountsTheLoss) {
  // L (checkpointable, 4 GPUs) has 121200 GPU-s at 30300: more than five levels, so
  // a new job outranks it by the default margin. It loses the 300 s since its last
  // 600 s checkpoint, waits the requeue delay and restores for 60 s.
  const std::vector<TraceJob> trace = {job(1, 0, 100000, 4, true), job(2, 30300, 100, 4)};
  const Result r = simulate(trace, cluster(Policy::dl, 1, 4));
  EXPECT_EQ(r.preemptions, 1u);
  EXPECT_DOUBLE_EQ(r.lost_gpu_s, 4 * 300 + 4 * 60);
  const double l_end = 30300 + 121 + 60 + (100000 - 30000);
  EXPECT_DOUBLE_EQ(r.makespan_s, l_end);
  EXPECT_DOUBLE_EQ(r.avg_jct_s, (l_end + 100) / 2);
}

TEST(Sim, DlNeverPreemptsAJobThatCannotCheckpoint) {
  const std::vector<TraceJob> trace = {job(1, 0, 100000, 4, false), job(2, 30300, 100, 4)};
  const Result r = simulate(trace, cluster(Policy::dl, 1, 4));
  EXPECT_EQ(r.preemptions, 0u);
  EXPECT_DOUBLE_EQ(r.makespan_s, 100100);
}

TEST(Sim, DlStartsACheckpointableJobInAShorterHoleAndRequeuesItAtTheEnd) {
  // As in the backfill test, but C runs for 5000 s: too long for the hole before B,
  // yet it may use the hole (>= time_min, 600 s) and checkpoint when it closes.
  const std::vector<TraceJob> trace = {job(1, 0, 1000, 2), job(2, 10, 100, 4),
                                       job(3, 20, 5000, 2, true)};
  const Result r = simulate(trace, cluster(Policy::dl, 1, 4));
  // C: 30..1050 (900 s of work after its 120 s final checkpoint), requeued, eligible
  // at 1171, restores 60 s and does the remaining 4100 s. B: 1050..1150.
  EXPECT_DOUBLE_EQ(r.makespan_s, 1171 + 60 + 4100);
  EXPECT_DOUBLE_EQ(r.avg_jct_s, (1000 + (1150 - 10) + (5331 - 20)) / 3.0);
  EXPECT_DOUBLE_EQ(r.lost_gpu_s, 2 * 120 + 2 * 60);
  EXPECT_EQ(r.preemptions, 0u);
  // fifo-backfill cannot use the hole: C waits for B.
  const Result f = simulate(trace, cluster(Policy::fifo_backfill, 1, 4));
  EXPECT_DOUBLE_EQ(f.makespan_s, 1100 + 5000);
}

TEST(Sim, DecideChangesNothing) {
  const std::vector<TraceJob> trace = {job(1, 0, 1000, 4), job(2, 10, 100, 4), job(3, 11, 100, 2)};
  Simulator sim(trace, cluster(Policy::dl, 1, 4));
  sim.run_until(20);
  const auto a = sim.decide();
  const auto b = sim.decide();
  ASSERT_TRUE(a.job);
  EXPECT_EQ(*a.job, 2u);
  EXPECT_TRUE(a.alloc.empty());
  EXPECT_TRUE(a.victims.empty());
  EXPECT_EQ(b.job, a.job);
  EXPECT_EQ(sim.pending(), 2u);
  EXPECT_EQ(sim.running(), 1u);
}

TEST(Sim, JobsThatCanNeverRunAreRejected) {
  const std::vector<TraceJob> trace = {job(17, 0, 10, 9)};
  try {
    simulate(trace, cluster(Policy::fifo_backfill, 2, 4));
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "job 17 asks for 9 GPUs; the cluster has 8");
  }
  try {
    simulate(trace, cluster(Policy::dl, 2, 4));
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "job 17: --dl-gpus=9: a pack gang of 3x4 whole nodes can never run in "
                 "partition dl-sim (2 nodes x 4 GPUs); the largest pack gang there is 8 GPUs "
                 "(2x4)");
  }
  Options bad = cluster(Policy::dl, 2, 4);
  bad.limit_factor = 0.5;
  EXPECT_THROW(simulate(trace, bad), InputError);
  EXPECT_THROW(parse_policy("sjf"), InputError);
}

TEST(Sim, SameInputsSameResults) {
  IbmFfdlOptions g;
  g.jobs = 300;
  g.load = 1.0;
  const auto trace = generate_ibm_ffdl(g);
  for (const auto policy : {Policy::fifo_backfill, Policy::dl}) {
    Options o = cluster(policy, 100, 4);
    o.limit_factor = 3;
    const Result a = simulate(trace, o);
    const Result b = simulate(trace, o);
    EXPECT_EQ(a.avg_jct_s, b.avg_jct_s);
    EXPECT_EQ(a.preemptions, b.preemptions);
    EXPECT_EQ(a.jobs, 300u);
    EXPECT_GT(a.gpu_util, 0);
    EXPECT_LE(a.gpu_util, 1);
    EXPECT_LE(a.p50_jct_s, a.p95_jct_s);
  }
}

TEST(Generate, IbmFfdlSizesLoadAndSeed) {
  IbmFfdlOptions g;
  g.load = 0.9;
  g.seed = 3;
  const auto jobs = generate_ibm_ffdl(g);
  ASSERT_EQ(jobs.size(), 4000u);
  double gpus = 0, work = 0, checkpointable = 0;
  for (const auto& j : jobs) {
    EXPECT_GE(j.gpus, 1u);
    EXPECT_LE(j.gpus, 32u);
    EXPECT_GE(j.duration_s, 60);
    EXPECT_LE(j.duration_s, 7 * 86400);
    gpus += j.gpus;
    work += j.gpus * j.duration_s;
    checkpointable += j.checkpointable;
  }
  EXPECT_NEAR(gpus / 4000, 11.25, 0.5);
  EXPECT_NEAR(checkpointable / 4000, 0.5, 0.05);
  const double span = jobs.back().submit_s;
  EXPECT_NEAR(work / (400 * span), 0.9, 0.1);
  EXPECT_EQ(generate_ibm_ffdl(g)[1234].duration_s, jobs[1234].duration_s);
  g.seed = 4;
  EXPECT_NE(generate_ibm_ffdl(g)[1234].duration_s, jobs[1234].duration_s);
  g.load = 0;
  EXPECT_THROW(generate_ibm_ffdl(g), InputError);
  g.load = 1;
  g.nodes = 4;
  EXPECT_THROW(generate_ibm_ffdl(g), InputError);
}

}  // namespace
}  // namespace dl::sim
