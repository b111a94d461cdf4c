#include "sched/preempt.h"

#include <gtest/gtest.h>

#include <map>

#include "core/error.h"

namespace dl {
namespace {

using std::chrono::seconds;

TEST(Preempt, TimeSinceTheLastCheckpoint) {
  EXPECT_DOUBLE_EQ(seconds_since_checkpoint(1000, std::nullopt), 1000);
  EXPECT_DOUBLE_EQ(seconds_since_checkpoint(1000, 600.0), 400);
  EXPECT_DOUBLE_EQ(seconds_since_checkpoint(1200, 600.0), 0);
  EXPECT_DOUBLE_EQ(seconds_since_checkpoint(-3, 600.0), 0);
}

TEST(Preempt, VictimOrderIsPreemptibleOnlyLeastLostWorkFirst) {
  const auto order = victim_order({
      {1, 8, 100, true},  // 800 GPU-s
      {2, 1, 500, true},  // 500
      {3, 2, 10, false},  // not preemptible
      {4, 4, 125, true},  // 500, more GPUs than job 2
      {5, 1, 500, true},  // 500, same as job 2, newer
  });
  ASSERT_EQ(order.size(), 4u);
  EXPECT_EQ(order[0].id, 5u);
  EXPECT_EQ(order[1].id, 2u);
  EXPECT_EQ(order[2].id, 4u);
  EXPECT_EQ(order[3].id, 1u);
}

TEST(Preempt, VictimRankSortsLikeLostWork) {
  EXPECT_EQ(victim_rank(0), 0);
  EXPECT_EQ(victim_rank(-1), 0);
  EXPECT_LT(victim_rank(10), victim_rank(11));
  EXPECT_LT(victim_rank(1e6), victim_rank(1.01e6));
  EXPECT_EQ(victim_rank(1e300), 65535);
}

// Nodes with free GPUs; the preemptor needs `need` GPUs on one node.
class OneNodeTrial : public VictimTrial {
 public:
  OneNodeTrial(std::map<std::uint64_t, std::uint32_t> node_of, std::uint32_t need)
      : node_of_(std::move(node_of)), need_(need) {}
  void release(const VictimCandidate& v) override { free_[node_of_.at(v.id)] += v.gpus; }
  void take_back(const VictimCandidate& v) override { free_[node_of_.at(v.id)] -= v.gpus; }
  bool preemptor_fits() const override {
    for (const auto& [node, f] : free_) {
      if (f >= need_) return true;
    }
    return false;
  }
  std::map<std::uint32_t, std::uint32_t> free_;

 private:
  std::map<std::uint64_t, std::uint32_t> node_of_;
  std::uint32_t need_;
};

TEST(Preempt, ChooseVictimsTakesTheCheapestThatMakeRoom) {
  // Node 0 runs jobs 1 (2 GPUs, cheap) and 2 (2 GPUs, dear); node 1 runs job 3 (4 GPUs).
  OneNodeTrial trial({{1, 0}, {2, 0}, {3, 1}}, 4);
  const auto victims =
      choose_victims({{1, 2, 10, true}, {2, 2, 1000, true}, {3, 4, 400, true}}, trial);
  // In order: 1 (20 GPU-s) does not make room, 3 (1600) does; 1 was not needed.
  ASSERT_EQ(victims.size(), 1u);
  EXPECT_EQ(victims[0].id, 3u);
  EXPECT_EQ(trial.free_[0], 0u);
  EXPECT_EQ(trial.free_[1], 4u);
}

TEST(Preempt, ChooseVictimsLeavesTheTrialAloneWhenNothingMakesRoom) {
  OneNodeTrial trial({{1, 0}, {2, 1}}, 4);
  const auto victims =
      choose_victims({{1, 2, 10, true}, {2, 2, 10, true}, {3, 4, 1, false}}, trial);
  EXPECT_TRUE(victims.empty());
  EXPECT_EQ(trial.free_[0], 0u);
  EXPECT_EQ(trial.free_[1], 0u);
  EXPECT_TRUE(choose_victims({}, trial).empty());
}

TEST(Preempt, OutranksNeedsTheMargin) {
  PriorityParams p;
  p.preempt_margin = 100;
  EXPECT_TRUE(outranks(1100, 1000, p));
  EXPECT_FALSE(outranks(1099, 1000, p));
}

TEST(Preempt, WarnTimeIsGracePlusThirtySeconds) {
  EXPECT_EQ(warn_time(seconds(120)), seconds(150));
  EXPECT_EQ(warn_time(seconds(65505)), seconds(65535));
  try {
    warn_time(seconds(65506));
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "--dl-grace=18h11m46s: a preemptible job's grace must be at most 65505s "
                 "(Slurm's --signal time is at most 65535s and slurm-dl adds 30s)");
  }
}

TEST(Preempt, TimeMinIsFourWarnTimesInWholeMinutes) {
  EXPECT_EQ(backfill_time_min(seconds(120), std::nullopt), seconds(600));
  EXPECT_EQ(backfill_time_min(seconds(10), std::nullopt), seconds(180));  // 160 s -> 3 min
  EXPECT_EQ(backfill_time_min(seconds(120), seconds(3600)), seconds(600));
  EXPECT_FALSE(backfill_time_min(seconds(120), seconds(600)));
  EXPECT_FALSE(backfill_time_min(seconds(120), seconds(300)));
}

}  // namespace
}  // namespace dl

namespace dl {
namespace {

TEST(Preempt, EveryJobInALowerTierIsAVictimDlOrNot) {
  const PriorityParams p = parse_priority_params("");
  PreemptPair pair;
  pair.victim_tier = 1;
  pair.preemptor_tier = 10;
  // A plain job, a DL job without --dl-preemptible (an experiment label only), and
  // one with it: all preempted as preempt/partition_prio would, whatever their points.
  for (const bool preemptible : {false, true}) {
    for (const bool dl_priority : {false, true}) {
      pair.victim_dl_preemptible = preemptible;
      pair.dl_priority = dl_priority;
      pair.victim_points = 1e9;
      pair.preemptor_points = 0;
      EXPECT_TRUE(may_preempt(pair, p)) << preemptible << dl_priority;
    }
  }
  pair.victim_mode_off = true;
  EXPECT_FALSE(may_preempt(pair, p));
}

TEST(Preempt, AHigherTierIsNeverAVictim) {
  const PriorityParams p = parse_priority_params("");
  PreemptPair pair;
  pair.victim_tier = 10;
  pair.preemptor_tier = 1;
  pair.victim_dl_preemptible = true;
  pair.dl_priority = true;
  pair.preemptor_points = 1e9;
  EXPECT_FALSE(may_preempt(pair, p));
}

TEST(Preempt, OnlyJobsOfTheSameTierNeedTheirDlFields) {
  PreemptPair pair;  // DL fields left unset: preempt/dl does not read them here
  pair.victim_tier = 1;
  pair.preemptor_tier = 10;
  EXPECT_EQ(partitions_decide(pair), std::optional<bool>(true));
  pair.victim_mode_off = true;
  EXPECT_EQ(partitions_decide(pair), std::optional<bool>(false));
  pair.victim_mode_off = false;
  pair.victim_tier = 20;
  EXPECT_EQ(partitions_decide(pair), std::optional<bool>(false));
  pair.victim_tier = 10;
  EXPECT_EQ(partitions_decide(pair), std::nullopt);
}

TEST(Preempt, WithinATierOnlyDlPreemptibleJobsOutrankedByTheMargin) {
  const PriorityParams p = parse_priority_params("queues=none");  // the continuous LAS
  PreemptPair pair;
  pair.victim_tier = pair.preemptor_tier = 1;
  pair.dl_priority = true;
  pair.victim_points = 0;
  pair.preemptor_points = p.margin();
  EXPECT_FALSE(may_preempt(pair, p));  // not --dl-preemptible: as without slurm-dl
  pair.victim_dl_preemptible = true;
  EXPECT_TRUE(may_preempt(pair, p));
  pair.preemptor_points = p.margin() - 1;
  EXPECT_FALSE(may_preempt(pair, p));
  pair.preemptor_points = p.margin();
  pair.dl_priority = false;  // no DL priority to compare
  EXPECT_FALSE(may_preempt(pair, p));
}

TEST(PreemptQueues, OnlyAJobInALowerQueuePreempts) {
  const auto p = parse_priority_params("queues=1000s:100000s,age_period=1d");
  const double fresh = site_factor(0, 0, p, 4);
  const double crossed = site_factor(1500, 0, p, 4);        // queue 1
  const double same_queue = site_factor(900, 50000, p, 4);  // queue 0, aged
  EXPECT_TRUE(outranks(fresh, crossed, p));
  EXPECT_FALSE(outranks(crossed, fresh, p));
  // Within a queue no one preempts, however long either has waited.
  EXPECT_FALSE(outranks(same_queue, fresh, p));
  EXPECT_FALSE(outranks(fresh, same_queue, p));
  PreemptPair pair;
  pair.victim_dl_preemptible = true;
  pair.dl_priority = true;
  pair.victim_points = crossed;
  pair.preemptor_points = fresh;
  EXPECT_TRUE(may_preempt(pair, p));
  pair.victim_dl_preemptible = false;  // preemptible (checkpointable) jobs only
  EXPECT_FALSE(may_preempt(pair, p));
}

TEST(PreemptQueues, ACheckpointDueAtAWholeSecondRunTimeIsNotTakenAsWrittenThen) {
  // slurmctld sees 60 s of run time: the job may have run 59.1 s, before the checkpoint
  // due at 60 s (bench/sched/calibrate saw such victims lose the whole interval).
  EXPECT_FALSE(just_checkpointed(checkpointed_progress(60), 15.0, 2));
  // Nor at 61 s: Slurm's StartTime is the second it started the job in, truncated, and
  // the job's program starts after it. Started at S + 0.97 s with its program running
  // 0.19 s later, a job writes the checkpoint due at 15 s at S + 16.16, after a backfill
  // pass at S + 16.0 sees 16 s of run time (calibrate: 3 of 85 victims lost the
  // interval so).
  EXPECT_FALSE(just_checkpointed(checkpointed_progress(61), 15.0, 2));
  EXPECT_TRUE(just_checkpointed(checkpointed_progress(62), 15.0, 2));
  EXPECT_TRUE(just_checkpointed(checkpointed_progress(64), 15.0, 2));
  EXPECT_FALSE(just_checkpointed(checkpointed_progress(65), 15.0, 2));
  EXPECT_DOUBLE_EQ(checkpointed_progress(0), 0);
}

TEST(PreemptQueues, AVictimOnlyRightAfterACheckpoint) {
  EXPECT_FALSE(just_checkpointed(599, 600.0, 60));  // none saved yet in this run
  EXPECT_TRUE(just_checkpointed(600, 600.0, 60));
  EXPECT_TRUE(just_checkpointed(1259, 600.0, 60));
  EXPECT_FALSE(just_checkpointed(1261, 600.0, 60));
  EXPECT_TRUE(just_checkpointed(5, std::nullopt, 60));  // checkpoints on the signal
  const auto p = parse_priority_params("queues=1000s,interval=30s");
  PreemptPair pair;
  pair.victim_dl_preemptible = true;
  pair.dl_priority = true;
  pair.victim_points = site_factor(5000, 0, p, 1);
  pair.preemptor_points = site_factor(0, 0, p, 1);
  pair.victim_ckpt_every_s = 600;
  pair.victim_progress_s = 1230;  // 30 s after its second checkpoint: within 2 x 30 s
  EXPECT_TRUE(may_preempt(pair, p));
  pair.victim_progress_s = 1300;
  EXPECT_FALSE(may_preempt(pair, p));
}

}  // namespace
}  // namespace dl
