#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"
#include "sched/priority.h"
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
  return {id, submit, duration, gpus, "", checkpointable, ""};
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
    EXPECT_DOUBLE_EQ(r.gpu_util, 1.0);  // all submitted at 0: over the makespan
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

double start_of(const Result& r, std::uint64_t id) {
  for (const auto& o : r.outcomes) {
    if (o.id == id) return o.start_s;
  }
  ADD_FAILURE() << "no job " << id;
  return -1;
}

// Slurm's backfill reserves the nodes the job will start on, nothing more: a lower
// job may use the GPUs of other nodes past the reservation's start.
TEST(Sim, FifoReservesOnlyTheNodesTheHeadNeeds) {
  // A fills node 0 until 1000, B half of node 1; H (4 GPUs) reserves node 0 from 1000;
  // C (2 GPUs, long) fits in node 1's free GPUs and starts at the first backfill pass.
  const std::vector<TraceJob> trace = {job(1, 0, 1000, 4), job(2, 0, 1000, 2), job(3, 10, 100, 4),
                                       job(4, 20, 5000, 2)};
  const Result r = simulate(trace, cluster(Policy::fifo_backfill, 2, 4));
  EXPECT_DOUBLE_EQ(start_of(r, 4), 30);
  EXPECT_DOUBLE_EQ(start_of(r, 3), 1000);
}

// cons_tres places --gpus=N on any nodes with free GPUs, not one run of consecutive
// nodes (that is --contiguous).
TEST(Sim, FifoPlacesAGangOnNodesThatAreNotConsecutive) {
  // Nodes 0 and 2 free up at 100, node 1 stays busy until 1000: 8 GPUs start at 100.
  const std::vector<TraceJob> trace = {job(1, 0, 100, 4), job(2, 0, 1000, 4), job(3, 0, 100, 4),
                                       job(4, 50, 100, 8)};
  const Result r = simulate(trace, cluster(Policy::fifo_backfill, 3, 4));
  EXPECT_DOUBLE_EQ(start_of(r, 4), 100);
  EXPECT_EQ(r.split_small_jobs, 0u);
}

// A job that cannot start now is reserved where and when it can start (the nodes its
// placement would use then), never from "now + 1" on GPUs it cannot have: the lower
// jobs keep them.
TEST(Sim, FifoAJobThatCannotStartKeepsNoGpusFromLowerJobs) {
  // A fills node 0, B and E half of nodes 1 and 2 until 1000 (F left at 5). H (5 GPUs)
  // reserves nodes 0 and 1 from 1000; C (2 GPUs, long) takes node 2's free GPUs and
  // D (ends before 1000) node 1's, both at the first backfill pass.
  const std::vector<TraceJob> trace = {job(1, 0, 1000, 4), job(2, 0, 1000, 2), job(3, 0, 5, 2),
                                       job(4, 0, 1000, 2), job(5, 10, 100, 5), job(6, 15, 5000, 2),
                                       job(7, 20, 500, 2)};
  const Result r = simulate(trace, cluster(Policy::fifo_backfill, 3, 4));
  EXPECT_DOUBLE_EQ(start_of(r, 6), 30);
  EXPECT_DOUBLE_EQ(start_of(r, 7), 30);
  EXPECT_DOUBLE_EQ(start_of(r, 5), 1000);
}

// Every pending job's reservation holds whole nodes (Slurm's backfill node map), not
// a number of GPUs anywhere: a lower job may not use the reserved node's other GPUs.
TEST(Sim, FifoReservesLowerJobsByNodes) {
  // A fills node 0 until 1000; B holds 2 GPUs of node 1 until 300. H (8 GPUs) waits for
  // 1000; P (3 GPUs) reserves node 1 from 300; L (1 GPU) would overlap P's
  // reservation: it starts with P (the first pass after B ends, 330), on node 1's fourth GPU.
  const std::vector<TraceJob> trace = {job(1, 0, 1000, 4), job(2, 0, 300, 2), job(3, 5, 100, 8),
                                       job(4, 6, 200, 3), job(5, 7, 400, 1)};
  const Result r = simulate(trace, cluster(Policy::fifo_backfill, 2, 4));
  EXPECT_DOUBLE_EQ(start_of(r, 4), 330);
  EXPECT_DOUBLE_EQ(start_of(r, 5), 330);
}

// A job that cannot start within bf_window gets no reservation, the head included.
TEST(Sim, FifoHonoursTheBackfillWindowForTheHead) {
  // H (8 GPUs) can start only at 5000, past a 600 s window: C (2 GPUs) runs over it.
  const std::vector<TraceJob> trace = {job(1, 0, 5000, 4), job(2, 0, 5000, 2), job(3, 10, 100, 8),
                                       job(4, 20, 10000, 2)};
  Options o = cluster(Policy::fifo_backfill, 2, 4);
  o.bf_window_s = 600;
  const Result r = simulate(trace, o);
  EXPECT_DOUBLE_EQ(start_of(r, 4), 30);
  EXPECT_DOUBLE_EQ(start_of(r, 3), 10030);
}

// cons_tres' will-run test frees running jobs in batches (those ending within 30 s of
// the first, aligned): a job is expected at the batch's last end, and reserved there.
TEST(Sim, FifoExpectsAStartWhenABatchOfEndingJobsHasEnded) {
  // A (4 GPUs, node 0) ends by its limit at 180, B (1 GPU, node 1) at 120: one batch.
  // H (4 GPUs) is expected at 180, on node 0 (both nodes free then, best fit in order),
  // not at 120 on node 1; so L (3 GPUs, long) starts on node 1 at the first pass.
  const std::vector<TraceJob> trace = {job(1, 0, 180, 4), job(2, 0, 120, 1), job(3, 10, 60, 4),
                                       job(4, 20, 3600, 3)};
  Options o = cluster(Policy::fifo_backfill, 2, 4);
  o.round_limits = false;
  const Result r = simulate(trace, o);
  EXPECT_DOUBLE_EQ(start_of(r, 4), 30);
  EXPECT_DOUBLE_EQ(start_of(r, 3), 180);
}

// A job the backfill pass starts is running for the will-run tests of the jobs after it
// in the same pass: its GPUs come back at its time limit.
TEST(Sim, BackfillExpectsTheJobsItStartedToEndAtTheirLimits) {
  // 2 nodes x 4 GPUs: A (4 GPUs) on node 0 until 1020, P (2 GPUs) on node 1 until 120.
  // B (8 GPUs) heads the queue. The pass at 30 starts S (1 GPU, until 90) on node 1; H
  // (4 GPUs) is then expected on node 1 at 120 (S and P ended) and reserved there, so
  // L (1 GPU, 9 minutes) would run into H's reservation and waits. With S's GPUs never
  // coming back, H would be expected on node 0 at 1020 and L would start at 30.
  const std::vector<TraceJob> trace = {job(1, 0, 1020, 4), job(2, 0, 120, 2), job(3, 1, 60, 8),
                                       job(4, 2, 60, 1),   job(5, 3, 240, 4), job(6, 4, 540, 1)};
  Options o = cluster(Policy::fifo_backfill, 2, 4);
  o.round_limits = false;
  const Result r = simulate(trace, o);
  EXPECT_DOUBLE_EQ(start_of(r, 4), 30);  // S
  EXPECT_GE(start_of(r, 6), 120);        // L
}

// Users give round time limits (Tsafrir et al.), well above what their jobs need.
TEST(Sim, UserTimeLimitsAreRoundAndNeverShort) {
  for (const double d : {1.0, 59.0, 61.0, 500.0, 3599.0, 3601.0, 40000.0, 400000.0}) {
    for (const double u : {0.0, 0.3, 0.99}) {
      const double limit = user_time_limit(d, u, 3);
      EXPECT_GE(limit, d);
      EXPECT_EQ(std::fmod(limit, 60), 0) << d;
      if (limit > 3600) {
        EXPECT_EQ(std::fmod(limit, 3600), 0) << d << " " << limit;
      }
    }
  }
  EXPECT_EQ(user_time_limit(61, 0, 3), 120);
  EXPECT_EQ(user_time_limit(1900, 0, 3), 3600);  // 32 min: asked for an hour
  EXPECT_EQ(user_time_limit(4000, 0.5, 3), 4 * 3600);
  EXPECT_EQ(user_time_limit(4000, 0.5, 3, false), 8040);
}

// Utilization: GPUs in use, averaged from the first to the last submit; idle GPUs
// while a pending job would fit in them, likewise.
TEST(Sim, UtilizationAndIdleGpusWhileAJobThatFitsWaits) {
  // 2 nodes x 2 GPUs. A holds 2 GPUs until 1000; B (4 GPUs) waits for it and reserves
  // both nodes; C (2 GPUs, long) would fit in the 2 idle GPUs but would delay B: it
  // waits from 10 to the end of B. D arrives at 1000: the interval is [0, 1000].
  const std::vector<TraceJob> trace = {job(1, 0, 1000, 2), job(2, 0, 100, 4), job(3, 10, 5000, 2),
                                       job(4, 1000, 10, 1)};
  const Result r = simulate(trace, cluster(Policy::fifo_backfill, 2, 2));
  EXPECT_DOUBLE_EQ(r.gpu_util, 0.5);
  EXPECT_DOUBLE_EQ(r.idle_while_fit, 2 * 990 / 4000.0);
  // The 2 idle GPUs are on one node, where C fits.
  EXPECT_DOUBLE_EQ(r.idle_while_node_fit, r.idle_while_fit);
  // The tail after the last submit does not count: C runs from 1100 to 6100.
  EXPECT_DOUBLE_EQ(r.makespan_s, 6100);
}

TEST(Sim, UtilizationIsNotTheMakespansShare) {
  // One 4-GPU node: a 1-GPU job of 10000 s at 0, then 3 one-GPU jobs of 100 s at 0..200.
  // From 0 to 200 two to four GPUs are busy; the long job's tail does not count.
  const std::vector<TraceJob> trace = {job(1, 0, 10000, 1), job(2, 0, 100, 1), job(3, 100, 100, 1),
                                       job(4, 200, 100, 1)};
  const Result r = simulate(trace, cluster(Policy::fifo_backfill, 1, 4));
  EXPECT_DOUBLE_EQ(r.gpu_util, 2.0 / 4);
  EXPECT_DOUBLE_EQ(r.idle_while_fit, 0);
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
  Options o = cluster(Policy::dl, 1, 4);
  o.round_limits = false;  // A's limit is 1020 s
  const Result r = simulate(trace, o);
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

// dlrun's periodic rounds one at a time (launcher/agreement.cc, next_periodic_round):
// the progress saved by run time t.
double saved_by_rounds(double t, double restore, double every) {
  double saved = 0;
  for (double asked = every;;) {
    const double done = std::max(asked, restore);
    if (done > t) return saved;
    saved = done - restore;
    asked = std::ceil((done + every / 2) / every - 1e-9) * every;
  }
}

TEST(SavedProgress, WithoutARestoreEveryIntervalOfRunTime) {
  EXPECT_DOUBLE_EQ(saved_progress(0, 0, 600), 0);
  EXPECT_DOUBLE_EQ(saved_progress(599, 0, 600), 0);
  EXPECT_DOUBLE_EQ(saved_progress(600, 0, 600), 600);
  EXPECT_DOUBLE_EQ(saved_progress(1799, 0, 600), 1200);
  EXPECT_DOUBLE_EQ(saved_progress(1800, 0, 600), 1800);
}

TEST(SavedProgress, AShorterRestoreKeepsTheRunTimeGrid) {
  // The first checkpoint at run time 600 saves 600 - 60 s of work.
  EXPECT_DOUBLE_EQ(saved_progress(-5, 60, 600), 0);
  EXPECT_DOUBLE_EQ(saved_progress(30, 60, 600), 0);
  EXPECT_DOUBLE_EQ(saved_progress(599, 60, 600), 0);
  EXPECT_DOUBLE_EQ(saved_progress(600, 60, 600), 540);
  EXPECT_DOUBLE_EQ(saved_progress(1250, 60, 600), 1140);
  EXPECT_DOUBLE_EQ(saved_progress(1800, 60, 600), 1740);
}

TEST(SavedProgress, ARestoreOfOneIntervalSavesNothingAtTheFirstCheckpoint) {
  EXPECT_DOUBLE_EQ(saved_progress(600, 600, 600), 0);
  EXPECT_DOUBLE_EQ(saved_progress(1199, 600, 600), 0);
  EXPECT_DOUBLE_EQ(saved_progress(1200, 600, 600), 600);
}

TEST(SavedProgress, ALongerRestoreMovesTheNextCheckpointToALaterPointOfTheGrid) {
  // The first round, due at 600, completes when the restore ends (1000) and saves
  // nothing; the next is at the first point of the grid after 1000 + 300: 1800.
  EXPECT_DOUBLE_EQ(saved_progress(1000, 1000, 600), 0);
  EXPECT_DOUBLE_EQ(saved_progress(1300, 1000, 600), 0);
  EXPECT_DOUBLE_EQ(saved_progress(1799, 1000, 600), 0);
  EXPECT_DOUBLE_EQ(saved_progress(1800, 1000, 600), 800);
  EXPECT_DOUBLE_EQ(saved_progress(2400, 1000, 600), 1400);
  // Up to 1.5 intervals of restore the second is at 2 intervals.
  EXPECT_DOUBLE_EQ(saved_progress(1200, 800, 600), 400);
  EXPECT_DOUBLE_EQ(saved_progress(1800, 800, 600), 1000);
}

TEST(SavedProgress, IsDlrunsRoundsOneAtATime) {
  for (const double every : {15.0, 600.0}) {
    for (double restore = 0; restore <= 3 * every; restore += every / 20) {
      for (double t = 0; t <= 10 * every; t += every / 40) {
        EXPECT_DOUBLE_EQ(saved_progress(t, restore, every), saved_by_rounds(t, restore, every))
            << "t " << t << ", restore " << restore << ", every " << every;
      }
    }
  }
}

// Discretized least attained service (queues at 1000 and 100000 GPU-seconds).
Options queues(std::uint32_t nodes, std::uint32_t gpus, double starve = 0) {
  Options o = cluster(Policy::dl, nodes, gpus);
  o.priority.queues = {1000, 100000};
  o.priority.starve_factor = starve;
  return o;
}

TEST(Sim, QueuesANewJobPreemptsAJobThatCrossedAThresholdOnceItHasCheckpointed) {
  // L has 4 x 300 = 1200 GPU-s at 300: past the first threshold (queue 1); the new job
  // is in queue 0. L becomes a victim when it saves its first checkpoint, at 600, and
  // loses no work (only its restore later).
  const std::vector<TraceJob> trace = {job(1, 0, 100000, 4, true), job(2, 300, 100, 4)};
  const Result r = simulate(trace, queues(1, 4));
  EXPECT_EQ(r.preemptions, 1u);
  EXPECT_DOUBLE_EQ(r.outcomes[1].start_s, 600);
  EXPECT_DOUBLE_EQ(r.lost_gpu_s, 4 * 60);
  // The continuous LAS at its defaults lets it wait (about 31 GPU-hours short).
  EXPECT_EQ(simulate(trace, cluster(Policy::dl, 1, 4)).preemptions, 0u);
}

TEST(Sim, QueuesNoPreemptionWithinAQueue) {
  // L (1 GPU) saves its first checkpoint at 600, when both are in queue 0, crosses
  // 1000 GPU-s at 1000 and saves its next checkpoint at 1200: the new job (at 100)
  // preempts it then, losing nothing.
  const std::vector<TraceJob> trace = {job(1, 0, 100000, 1, true), job(2, 100, 100, 1)};
  const Result r = simulate(trace, queues(1, 1));
  EXPECT_EQ(r.preemptions, 1u);
  EXPECT_DOUBLE_EQ(r.outcomes[1].start_s, 1200);
  EXPECT_DOUBLE_EQ(r.lost_gpu_s, 60);  // its restore
}

TEST(Sim, QueuesARestartedJobIsAVictimAtItsRunTimeCheckpointsAsPreemptDlSeesIt) {
  // A takes L at 600, L's first checkpoint (as in the first queues test); L restarts at
  // 721 (the requeue delay), restoring until 781. dlrun checkpoints on L's run time
  // (saved_progress): at 1321, saving 540 s of work, where preempt/dl's window opens too. B (queue
  // 0, at 1330) preempts L at once, 9 s into that window: L loses those 9 s and its two restores.
  // (A model with checkpoints 600 s after the restore would make B wait for the one at 1381.)
  const std::vector<TraceJob> trace = {job(1, 0, 100000, 4, true), job(2, 300, 100, 4),
                                       job(3, 1330, 100, 4)};
  const Result r = simulate(trace, queues(1, 4));
  EXPECT_EQ(r.preemptions, 2u);
  EXPECT_DOUBLE_EQ(r.outcomes[2].start_s, 1330);
  EXPECT_DOUBLE_EQ(r.lost_gpu_s, 4 * (9 + 60 + 60));
  // L restarts at 1451 (B ends at 1430) with 600 + 540 s saved.
  EXPECT_DOUBLE_EQ(r.outcomes[0].end_s, 1451 + 60 + (100000 - 1140));
}

TEST(Sim, QueuesAVictimWithALongRestoreLosesWhatItsCheckpointsHaveNotSaved) {
  // As above with a 1000 s restore: L's second run (from 721) restores until 1721; its
  // first checkpoint completes then and saves nothing new, its next is due at run time
  // 1800 (2521), the first point of the grid half an interval after. preempt/dl's window
  // after 1200 s of run time (1921) lets B (at 1950) take L, and L loses the 229 s it
  // worked since its restore, though the plugin expects 29.
  const std::vector<TraceJob> trace = {job(1, 0, 100000, 4, true), job(2, 300, 100, 4),
                                       job(3, 1950, 100, 4)};
  Options o = queues(1, 4);
  o.restore_s = 1000;
  const Result r = simulate(trace, o);
  EXPECT_EQ(r.preemptions, 2u);
  EXPECT_DOUBLE_EQ(r.outcomes[2].start_s, 1950);
  EXPECT_DOUBLE_EQ(r.lost_gpu_s, 4 * (229 + 1000 + 1000));
  EXPECT_DOUBLE_EQ(r.outcomes[0].end_s, 2071 + 1000 + (100000 - 600));
}

TEST(Sim, QueuesAJobBehindABlockedHeadPreemptsForItself) {
  // A (4 GPUs, cannot checkpoint) and L (4 GPUs, checkpointable, queue 1 from 250) run
  // on 2 x 4 GPUs. The 8-GPU gang H (at 700) cannot start even by preempting L; the
  // 1-GPU job S behind it (at 710) preempts L when L saves its checkpoint at 1200.
  const std::vector<TraceJob> trace = {job(1, 0, 100000, 4), job(2, 0, 100000, 4, true),
                                       job(3, 700, 100, 8), job(4, 710, 100, 1)};
  const Result r = simulate(trace, queues(2, 4));
  EXPECT_EQ(r.preemptions, 1u);
  EXPECT_DOUBLE_EQ(r.outcomes[3].start_s, 1200);
}

TEST(Sim, QueuesNeverPreemptAJobThatCannotCheckpoint) {
  const std::vector<TraceJob> trace = {job(1, 0, 100000, 4, false), job(2, 300, 100, 4)};
  EXPECT_EQ(simulate(trace, queues(1, 4)).preemptions, 0u);
}

TEST(Sim, QueuesFifoWithinAQueue) {
  // A runs; B (long) and then C (short) wait, both in queue 0: B starts first.
  const std::vector<TraceJob> trace = {job(1, 0, 200, 4), job(2, 10, 5000, 4), job(3, 20, 10, 4)};
  const Result r = simulate(trace, queues(1, 4));
  EXPECT_LT(r.outcomes[1].start_s, r.outcomes[2].start_s);
}

TEST(Sim, QueuesTheStarvationGuardPromotesAJobThatWaitedLong) {
  // A (checkpointable, queue 1 from 250) is preempted by B (at 300) when it saves its
  // first checkpoint at 600; B runs 5000 s. C (queue 0, at 1000) would come before A;
  // with starve=2 A is back in queue 0 once it has waited twice its 600 s of run time
  // (eligible at 721, promoted at 1921), and as it has waited longer than C it runs
  // first.
  const std::vector<TraceJob> trace = {job(1, 0, 2000, 4, true), job(2, 300, 5000, 4),
                                       job(3, 1000, 100, 4)};
  const Result guarded = simulate(trace, queues(1, 4, 2));
  EXPECT_LE(guarded.outcomes[0].end_s, guarded.outcomes[2].start_s);
  const Result unguarded = simulate(trace, queues(1, 4, 0));
  EXPECT_GT(unguarded.outcomes[0].end_s, unguarded.outcomes[2].start_s);
}

// The clairvoyant reference: remaining GPU-time first, read from the trace.
Options clairvoyant(std::uint32_t nodes, std::uint32_t gpus) {
  Options o = queues(nodes, gpus);
  o.clairvoyant = true;
  return o;
}

TEST(Sim, ClairvoyantStartsTheJobWithTheLeastRemainingGpuTimeFirst) {
  // As QueuesFifoWithinAQueue: C (10 s) starts before B (5000 s), which waited longer.
  const std::vector<TraceJob> trace = {job(1, 0, 200, 4), job(2, 10, 5000, 4), job(3, 20, 10, 4)};
  const Result r = simulate(trace, clairvoyant(1, 4));
  EXPECT_DOUBLE_EQ(r.outcomes[2].start_s, 200);
  EXPECT_DOUBLE_EQ(r.outcomes[1].start_s, 210);
  // GPU-time, not time: a 2-GPU job of 300 s (600 GPU-s) before a 4-GPU job of 200 s.
  const std::vector<TraceJob> gangs = {job(1, 0, 200, 4), job(2, 10, 200, 4), job(3, 20, 300, 2)};
  EXPECT_LT(simulate(gangs, clairvoyant(1, 4)).outcomes[2].start_s,
            simulate(gangs, clairvoyant(1, 4)).outcomes[1].start_s);
}

TEST(Sim, ClairvoyantPreemptsAJobThatNeedsTwiceTheGpuTimeAtItsCheckpoint) {
  // L needs 4 x 1000 GPU-s more than S at 300 and saves its first checkpoint at 600:
  // S preempts it then, losing no work.
  const std::vector<TraceJob> trace = {job(1, 0, 2000, 4, true), job(2, 300, 100, 4)};
  const Result r = simulate(trace, clairvoyant(1, 4));
  EXPECT_EQ(r.preemptions, 1u);
  EXPECT_DOUBLE_EQ(r.outcomes[1].start_s, 600);
  // At 600 L needs 1400 s: not twice S's 800, so S waits for L to end.
  const std::vector<TraceJob> close = {job(1, 0, 2000, 4, true), job(2, 300, 800, 4)};
  const Result w = simulate(close, clairvoyant(1, 4));
  EXPECT_EQ(w.preemptions, 0u);
  EXPECT_DOUBLE_EQ(w.outcomes[1].start_s, 2000);
}

TEST(Sim, ClairvoyantOnlyWithTheDlPolicy) {
  Options o = cluster(Policy::fifo_backfill, 1, 4);
  o.clairvoyant = true;
  try {
    simulate({job(1, 0, 10, 1)}, o);
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "--clairvoyant: only with --policy dl");
  }
}

TEST(Sim, QueuesAtPercentilesFollowTheFinishedJobs) {
  // Ten 10-GPU-second jobs finish by 30 s: p50 and p95 are both 10 GPU-seconds, so L
  // (4 GPUs from 40) is in queue 2 at once and the new job N (at 300) preempts it at its
  // first checkpoint (640). With one small job fewer there are no thresholds yet (one
  // queue) and N waits for L.
  const auto with_small = [](std::uint64_t small) {
    std::vector<TraceJob> trace;
    for (std::uint64_t id = 1; id <= small; ++id) trace.push_back(job(id, 0, 10, 1));
    trace.push_back(job(small + 1, 40, 100000, 4, true));
    trace.push_back(job(small + 2, 300, 100, 4));
    return trace;
  };
  Options o = cluster(Policy::dl, 1, 4);
  o.priority = parse_priority_params("queues=p50:p95");
  const Result adapted = simulate(with_small(kAdaptMinJobs), o);
  EXPECT_EQ(adapted.preemptions, 1u);
  EXPECT_DOUBLE_EQ(adapted.outcomes.back().start_s, 640);
  const Result too_few = simulate(with_small(kAdaptMinJobs - 1), o);
  EXPECT_EQ(too_few.preemptions, 0u);
  EXPECT_GT(too_few.outcomes.back().start_s, 100000);
}

TEST(Sim, QueuesAtPercentilesWeighEveryUserTheSame) {
  // User f's ten 10-GPU-second jobs, then users a and b one 4,000-GPU-second job each
  // (until 2030). Per job, p50 would be f's 10 GPU-seconds, L (4 GPUs from 2040) would be
  // past it at once and the new job N (at 2300) would preempt it at its first checkpoint
  // (2640). With each user weighing one third, p50 and p95 are 4,000 GPU-seconds, which
  // L passes at 3040: N preempts it at its next checkpoint (3240).
  std::vector<TraceJob> trace;
  for (std::uint64_t id = 1; id <= 10; ++id) trace.push_back(job(id, 0, 10, 1));
  for (auto& t : trace) t.user = "f";
  trace.push_back(job(11, 30, 1000, 4));
  trace.back().user = "a";
  trace.push_back(job(12, 30, 1000, 4));
  trace.back().user = "b";
  trace.push_back(job(13, 2040, 100000, 4, true));
  trace.push_back(job(14, 2300, 100, 4));
  Options o = cluster(Policy::dl, 1, 4);
  o.priority = parse_priority_params("queues=p50:p95");
  const Result r = simulate(trace, o);
  EXPECT_EQ(r.preemptions, 1u);
  EXPECT_DOUBLE_EQ(r.outcomes.back().start_s, 3240);
}

TEST(Sim, EvenShapesUseSharedNodesAndNeverSplitSmallGangs) {
  // Nodes 0 and 1 are partly busy (7 and 2 GPUs): a 12-GPU gang runs at once as 2x6
  // on nodes 1 and 2; as pack (2 whole nodes x 8) it waits for the small jobs.
  const std::vector<TraceJob> trace = {job(1, 0, 1000, 7), job(2, 0, 1000, 2), job(3, 1, 100, 12),
                                       job(4, 2, 100, 8)};
  Options even = cluster(Policy::dl, 3, 8);
  even.shapes = Shapes::even;
  const Result e = simulate(trace, even);
  EXPECT_DOUBLE_EQ(e.outcomes[2].start_s, 1);
  EXPECT_EQ(e.split_small_jobs, 0u);
  const Result p = simulate(trace, cluster(Policy::dl, 3, 8));
  EXPECT_GE(p.outcomes[2].start_s, 1000);
}

// The events of one job's runs (--runs), in order.
std::vector<RunEvent> runs_of(const Result& r, const std::string& job) {
  std::vector<RunEvent> v;
  for (const auto& e : r.runs) {
    if (e.job == job) v.push_back(e);
  }
  return v;
}

// Six 4-GPU nodes each with 3 GPUs busy until 1000, then a 6-GPU gang (2x3 first) at 5.
std::vector<TraceJob> one_gpu_free_on_six_nodes() {
  std::vector<TraceJob> trace;
  for (std::uint64_t id = 1; id <= 6; ++id) trace.push_back(job(id, 0, 1000, 3));
  trace.push_back(job(7, 5, 100, 6));
  return trace;
}

TEST(Sim, EvenShapesTakeAnotherEvenSplitWhenTheFirstDoesNotFit) {
  // Six 4-GPU nodes with one GPU free each: a 6-GPU gang (2x3 first) runs as 6x1.
  const std::vector<TraceJob> trace = one_gpu_free_on_six_nodes();
  Options even = cluster(Policy::dl, 6, 4);
  even.shapes = Shapes::even;
  EXPECT_DOUBLE_EQ(simulate(trace, even).outcomes[6].start_s, 5);
}

TEST(Sim, EvenFirstShapesKeepJobSubmitsOneSplitAsSlurmDoes) {
  // As above, but a Slurm job has the one shape job_submit/dl gave it (2x3): it waits.
  const std::vector<TraceJob> trace = one_gpu_free_on_six_nodes();
  Options first = cluster(Policy::dl, 6, 4);
  first.shapes = Shapes::even_first;
  EXPECT_GE(simulate(trace, first).outcomes[6].start_s, 1000);
}

TEST(Sim, EvenReshapedShapesTakeAnotherSplitUnderSlurmsSchedulers) {
  // As above under Slurm's schedulers (cons_tres placement): with the other splits the
  // 6-GPU gang (submitted at 5) starts as 6x1 once site_factor/dl's next sample (every
  // 30 s from 0) has reshaped it; without them it waits for its 2x3.
  const std::vector<TraceJob> trace = one_gpu_free_on_six_nodes();
  Options reshaped = cluster(Policy::dl, 6, 4);
  reshaped.shapes = Shapes::even_reshaped;
  const Result r = simulate(trace, reshaped);
  EXPECT_DOUBLE_EQ(r.outcomes[6].start_s, 30);
  EXPECT_EQ(r.reshapes, 1u);
  reshaped.priority.interval = std::chrono::seconds(10);
  EXPECT_DOUBLE_EQ(simulate(trace, reshaped).outcomes[6].start_s, 10);
  reshaped.shapes = Shapes::even_first;
  const Result first = simulate(trace, reshaped);
  EXPECT_GE(first.outcomes[6].start_s, 1000);
  EXPECT_EQ(first.reshapes, 0u);
  // site_factor/dl's reshape=yes in the priority parameters means the same.
  reshaped.priority = parse_priority_params("reshape=yes");
  EXPECT_DOUBLE_EQ(simulate(trace, reshaped).outcomes[6].start_s, 30);
}

TEST(Sim, RecordsWhenAJobIsReshaped) {
  // The gang above, reshaped at the sample at 30 and started then: its runs say so, to
  // set beside slurmctld's "reshaped from" lines.
  const std::vector<TraceJob> trace = one_gpu_free_on_six_nodes();
  Options o = cluster(Policy::dl, 6, 4);
  o.shapes = Shapes::even_reshaped;
  o.record_runs = true;
  const Result r = simulate(trace, o);
  const std::vector<RunEvent> v = runs_of(r, "7");
  ASSERT_GE(v.size(), 2u);
  EXPECT_EQ(v[0].event, "reshape");
  EXPECT_DOUBLE_EQ(v[0].t, 30);
  EXPECT_EQ(v[1].event, "start");
  EXPECT_DOUBLE_EQ(v[1].t, 30);
  for (const auto& e : r.runs) {
    if (e.job != "7") {
      EXPECT_NE(e.event, "reshape") << e.job;
    }
  }
}

TEST(Sim, ShapesOptionSetsTheModel) {
  EXPECT_EQ(parse_shapes("pack"), Shapes::pack);
  EXPECT_EQ(parse_shapes("pack-first"), Shapes::pack_first);
  EXPECT_EQ(parse_shapes("even"), Shapes::even);
  EXPECT_EQ(parse_shapes("even-first"), Shapes::even_first);
  EXPECT_EQ(parse_shapes("even-reshaped"), Shapes::even_reshaped);
  EXPECT_FALSE(cons_tres_placement(Shapes::pack) || cons_tres_placement(Shapes::even));
  EXPECT_TRUE(cons_tres_placement(Shapes::pack_first) && cons_tres_placement(Shapes::even_first) &&
              cons_tres_placement(Shapes::even_reshaped));
  try {
    parse_shapes("ragged");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "--shapes=ragged: expected pack, pack-first, even, even-first or even-reshaped");
  }
}

TEST(Sim, ConsTresPlacementTakesTheFirstNodeOfTheRunNotTheBestFit) {
  // 4 nodes x 4 GPUs: nodes 0 and 1 busy, node 2 free again at 10, node 3 has 2 free.
  // A 2-GPU job at 11: cons_tres takes node 2 (the first of the run 2-3), best fit node
  // 3; the 4-GPU job at 12 then waits for a whole node (1000) or starts at once.
  const std::vector<TraceJob> trace = {job(1, 0, 1000, 4), job(2, 1, 1000, 4),  job(3, 2, 8, 4),
                                       job(4, 3, 1000, 2), job(5, 11, 1000, 2), job(6, 12, 100, 4)};
  Options slurm = cluster(Policy::dl, 4, 4);
  slurm.shapes = Shapes::even_first;
  EXPECT_GE(simulate(trace, slurm).outcomes[5].start_s, 1000);
  slurm.shapes = Shapes::even;
  EXPECT_DOUBLE_EQ(simulate(trace, slurm).outcomes[5].start_s, 12);
  // The default pack shapes: the same gangs (none larger than a node), the same places.
  slurm.shapes = Shapes::pack_first;
  EXPECT_GE(simulate(trace, slurm).outcomes[5].start_s, 1000);
  slurm.shapes = Shapes::pack;
  EXPECT_DOUBLE_EQ(simulate(trace, slurm).outcomes[5].start_s, 12);
}

TEST(Sim, PackFirstShapesHoldWholeNodesForALargerGang) {
  // 2 nodes x 4 GPUs: a 6-GPU gang takes both nodes whole (pack), so the 1-GPU job
  // behind it waits for it; split evenly (2x3) it leaves a GPU on each node.
  const std::vector<TraceJob> trace = {job(1, 0, 100, 6), job(2, 1, 100, 1)};
  Options o = cluster(Policy::dl, 2, 4);
  o.shapes = Shapes::pack_first;
  EXPECT_DOUBLE_EQ(simulate(trace, o).outcomes[1].start_s, 100);
  o.shapes = Shapes::even_first;
  EXPECT_LT(simulate(trace, o).outcomes[1].start_s, 100);
}

// dl shapes placed as Slurm places them (the calibration against slurmctld).
Options slurm_dl(std::uint32_t nodes, std::uint32_t gpus, const char* params = "") {
  Options o = cluster(Policy::dl, nodes, gpus);
  o.shapes = Shapes::even_first;
  o.bf_interval_s = 2;
  o.priority = parse_priority_params(params);
  return o;
}

TEST(Sim, ConsTresDlBackfillReservesTheNodesOfEveryBlockedJob) {
  // 4 nodes x 4 GPUs: A fills node 0, E and F leave 1 GPU free on nodes 1 and 2, G 2 GPUs
  // on node 3 until 60. H (16 GPUs) heads the queue; C (4 GPUs) can start on node 3 at
  // 60 and, as in Slurm's backfill, reserves that node for [60, 120). D (2 GPUs) fits
  // only on node 3 now and would run into C's reservation: it waits. (By GPU totals,
  // 2 of the 6 GPUs free at 60 would remain after C: D would start at once and C wait.)
  const std::vector<TraceJob> trace = {job(1, 0, 600, 4), job(2, 0, 600, 3),  job(3, 0, 600, 3),
                                       job(4, 0, 60, 2),  job(5, 1, 100, 16), job(6, 2, 60, 4),
                                       job(7, 3, 120, 2)};
  const Result r = simulate(trace, slurm_dl(4, 4));
  EXPECT_LE(r.outcomes[5].start_s, 62);  // C
  EXPECT_GE(r.outcomes[6].start_s, 60);  // D
}

TEST(Sim, ConsTresDlJobsBelowABlockedHeadPreemptInTheBackfillPass) {
  // V (checkpointable, 4 GPUs, crosses 60 GPU-s at 15 s, checkpoints every 15 s) and N
  // fill 2 nodes; H (8 GPUs) heads the queue and cannot preempt enough; L (4 GPUs, queue
  // 0) may preempt V within 2 s after a checkpoint. Slurm's main scheduler tries no job
  // below a blocked head: L preempts V in a backfill pass (every 4 s here, which runs
  // even though nothing was released), the first one in V's window after 30: at 32.
  // Slurm cannot start L in that pass (V's nodes are busy until it is requeued) and its
  // main scheduler still stops at H: the next pass starts L, at 36 (slurmctld started
  // 4 of 28 preemptors so, 2.00 s after the preemption, in the calibration's calib-dl-1d).
  const std::vector<TraceJob> trace = {job(1, 0, 600, 4, true), job(2, 0, 600, 4),
                                       job(3, 1, 100, 8), job(4, 20, 60, 4)};
  Options o = slurm_dl(2, 4, "queues=60s:240s,interval=1s");
  o.ckpt_every_s = 15;
  o.requeue_delay_s = 11;
  o.bf_interval_s = 4;
  const Result r = simulate(trace, o);
  EXPECT_DOUBLE_EQ(r.outcomes[3].start_s, 36);
  EXPECT_EQ(r.preemptions, 1u);
}

TEST(Sim, ConsTresDlVictimsQualifyTwoSecondsAfterTheirCheckpointAsPreemptDlSeesThem) {
  // As above with a backfill pass every 2 s: V saves its checkpoint at 30, but preempt/dl
  // counts it written only once V's whole-second run time is past 30 by two seconds
  // (checkpointed_progress): L preempts V at 32, not at 30, and starts in the next pass.
  const std::vector<TraceJob> trace = {job(1, 0, 600, 4, true), job(2, 0, 600, 4),
                                       job(3, 1, 100, 8), job(4, 20, 60, 4)};
  Options o = slurm_dl(2, 4, "queues=60s:240s,interval=1s");
  o.ckpt_every_s = 15;
  o.requeue_delay_s = 11;
  const Result r = simulate(trace, o);
  EXPECT_DOUBLE_EQ(r.outcomes[3].start_s, 34);
  EXPECT_DOUBLE_EQ(r.lost_gpu_s, 4 * (2 + 60));  // 2 s of work and its restore
}

TEST(Sim, RecordsEachRunOfAPreemptedJob) {
  // The scenario above: V runs from 0, is preempted at 32 with 30 s saved, may start
  // again after the requeue hold (43), and ends once it has done its 600 s.
  const std::vector<TraceJob> trace = {job(1, 0, 600, 4, true), job(2, 0, 600, 4),
                                       job(3, 1, 100, 8), job(4, 20, 60, 4)};
  Options o = slurm_dl(2, 4, "queues=60s:240s,interval=1s");
  o.ckpt_every_s = 15;
  o.requeue_delay_s = 11;
  o.record_runs = true;
  const Result r = simulate(trace, o);
  const std::vector<RunEvent> v = runs_of(r, "1");
  ASSERT_GE(v.size(), 5u);
  EXPECT_EQ(v[0].event, "start");
  EXPECT_DOUBLE_EQ(v[0].t, 0);
  EXPECT_EQ(v[1].event, "preempt");
  EXPECT_DOUBLE_EQ(v[1].t, 32);
  EXPECT_DOUBLE_EQ(v[1].work_done_s, 30);
  EXPECT_EQ(v[2].event, "eligible");
  EXPECT_DOUBLE_EQ(v[2].t, 43);
  EXPECT_EQ(v[3].event, "start");
  EXPECT_GE(v[3].t, 43);
  EXPECT_EQ(v.back().event, "end");
  EXPECT_DOUBLE_EQ(v.back().t, r.outcomes[0].end_s);
  EXPECT_TRUE(simulate(trace, slurm_dl(2, 4, "queues=60s:240s,interval=1s")).runs.empty());
}

TEST(Sim, ConsTresDlBackfillPreemptsOnlyOffTheNodesReservedForHigherJobs) {
  // As above, but N and V end at 120 and H (8 GPUs) reserves both nodes from then on.
  // L (4 GPUs) would run past 120: Slurm's backfill keeps it off H's nodes, so it does
  // not preempt V (on node 0) and waits.
  const std::vector<TraceJob> trace = {job(1, 0, 120, 4, true), job(2, 0, 120, 4), job(3, 1, 60, 8),
                                       job(4, 20, 200, 4)};
  Options o = slurm_dl(2, 4, "queues=60s:240s,interval=1s");
  o.ckpt_every_s = 15;
  o.requeue_delay_s = 11;
  o.bf_interval_s = 4;
  const Result r = simulate(trace, o);
  EXPECT_EQ(r.preemptions, 0u);
  EXPECT_GE(r.outcomes[3].start_s, 120);
}

TEST(Sim, ConsTresDlBackfillReservesAJobWhereItsVictimCandidatesAreGone) {
  // 2 nodes x 4 GPUs: V (checkpointable, 2 GPUs, queue 1 from 30 s, a victim from 32)
  // and N0 (2 GPUs, until 120) on node 0, N1 (4 GPUs, until 600) on node 1. H (4 GPUs)
  // heads the queue and cannot start by preempting V alone. cons_tres' will-run test
  // removes H's victim candidates first: H is expected at 120 on node 0 (V gone, N0
  // ended), not at 600, and reserved there; L (2 GPUs, 2-minute limit) would run into
  // that reservation, so it does not preempt V at 32 (as slurmctld did not in the
  // calibration's run calib-dl-1d at 64 s).
  const std::vector<TraceJob> trace = {job(1, 0, 600, 2, true), job(2, 0, 120, 2),
                                       job(3, 0, 600, 4), job(4, 1, 60, 4), job(5, 20, 100, 2)};
  Options o = slurm_dl(2, 4, "queues=60s:240s,interval=1s");
  o.ckpt_every_s = 15;
  o.requeue_delay_s = 11;
  const Result r = simulate(trace, o);
  EXPECT_GE(r.outcomes[4].start_s, 120);  // L: not at 32 by preempting V
}

TEST(Sim, FifoRoundsReservationsOnTheControllersClock) {
  // One node x 4 GPUs: A (2 GPUs) from 40 with a 2-minute limit, B (4 GPUs) waits for
  // its end (160), C (2 GPUs, 1 minute) could run from 90 (the backfill pass) to 150.
  // B's reservation is rounded down to bf_resolution (60 s) on slurmctld's clock: with
  // the trace's time 0 at a whole minute it begins at 120 and C waits; at 20 s past one,
  // at 160 (trace time) and C runs at once.
  const std::vector<TraceJob> trace = {job(1, 40, 90, 2), job(2, 50, 60, 4), job(3, 61, 45, 2)};
  Options o = cluster(Policy::fifo_backfill, 1, 4);
  EXPECT_GE(simulate(trace, o).outcomes[2].start_s, 130);
  o.clock_offset_s = 20;
  EXPECT_DOUBLE_EQ(simulate(trace, o).outcomes[2].start_s, 90);
}

TEST(Sim, DlBackfillsPastAJobThatFitsByGpuTotalsButNotByItsShape) {
  // 3 nodes x 4 GPUs with 3 busy on nodes 0 and 1: 6 GPUs free, but the 6-GPU gang B
  // has no even split that fits (2x3, 3x2, 6x1). A phantom reservation of those 6 GPUs
  // from the next second on would keep the 1-GPU job C out until 1000; C backfills.
  const std::vector<TraceJob> trace = {job(1, 0, 1000, 3), job(2, 0, 1000, 3), job(3, 10, 100, 6),
                                       job(4, 20, 100, 1)};
  Options even = cluster(Policy::dl, 3, 4);
  even.shapes = Shapes::even;
  const Result r = simulate(trace, even);
  EXPECT_LT(r.outcomes[3].start_s, 1000);
  EXPECT_GE(r.outcomes[2].start_s, 1000);
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
