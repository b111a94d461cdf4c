#include "sched/priority.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"

namespace dl {
namespace {

using std::chrono::seconds;

std::string error_of(std::string_view text) {
  try {
    parse_priority_params(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(Priority, DefaultsAndEveryKey) {
  const auto d = parse_priority_params("");
  EXPECT_EQ(d.las_weight, 100000u);
  EXPECT_EQ(d.age_weight, 100000u);
  EXPECT_EQ(d.service_unit, seconds(3600));
  EXPECT_EQ(d.levels, 20u);
  EXPECT_EQ(d.age_period, seconds(3 * 86400));
  EXPECT_EQ(d.interval, seconds(30));
  EXPECT_FALSE(d.preempt_margin);
  EXPECT_DOUBLE_EQ(d.margin(), 25000);

  const auto p = parse_priority_params(
      "las_weight=1000,age_weight=2000,service_unit=1m,levels=10,age_period=2h,interval=5s,"
      "preempt_margin=300");
  EXPECT_EQ(p.las_weight, 1000u);
  EXPECT_EQ(p.age_weight, 2000u);
  EXPECT_EQ(p.service_unit, seconds(60));
  EXPECT_EQ(p.levels, 10u);
  EXPECT_EQ(p.age_period, seconds(7200));
  EXPECT_EQ(p.interval, seconds(5));
  EXPECT_DOUBLE_EQ(p.margin(), 300);
}

TEST(Priority, BadParametersAreRejectedWithTheKey) {
  EXPECT_EQ(error_of("bogus=1"),
            "priority parameter 'bogus=1': unknown key 'bogus' (expected las_weight, age_weight, "
            "service_unit, levels, age_period, interval, carry_half_life, preempt_margin, queues, "
            "starve or reshape)");
  EXPECT_EQ(error_of("levels"), "priority parameter 'levels': expected key=value");
  EXPECT_EQ(error_of("reshape=maybe"), "reshape=maybe: expected yes or no");
  EXPECT_NE(error_of("carry_half_life=30s").find("carry_half_life"), std::string::npos);
  EXPECT_EQ(parse_priority_params("carry_half_life=1d").carry_half_life, seconds(86400));
  EXPECT_EQ(parse_priority_params("").carry_half_life, seconds(7 * 86400));
  EXPECT_EQ(error_of("levels=0"), "levels=0: expected a whole number from 1 to 1000");
  EXPECT_EQ(error_of("interval=2h"),
            "interval=2h: expected a duration such as 90s, 30m or 2h, from 1s to 1h");
  EXPECT_EQ(error_of("las_weight=600000000,age_weight=600000000"),
            "priority parameters: las_weight + age_weight = 1200000000 exceeds 1000000000 "
            "(Slurm priorities are 32-bit)");
}

TEST(Priority, LeastAttainedServiceFirst) {
  const PriorityParams p;
  EXPECT_DOUBLE_EQ(las_points(0, p), 100000);
  EXPECT_DOUBLE_EQ(las_points(3600, p), 100000 * (1 - 1.0 / 20));      // one level
  EXPECT_DOUBLE_EQ(las_points(3 * 3600, p), 100000 * (1 - 2.0 / 20));  // two levels
  EXPECT_DOUBLE_EQ(las_points(1e30, p), 0);                            // floor
  EXPECT_GT(las_points(60, p), las_points(120, p));
}

TEST(Priority, AgingIsLinearAndUncapped) {
  const PriorityParams p;
  EXPECT_DOUBLE_EQ(age_points(0, p), 0);
  EXPECT_DOUBLE_EQ(age_points(3 * 86400, p), 100000);
  EXPECT_DOUBLE_EQ(age_points(6 * 86400, p), 200000);
  EXPECT_DOUBLE_EQ(age_points(-5, p), 0);
}

TEST(Priority, AJobThatHasWaitedAnAgePeriodOutranksEveryNewcomer) {
  const PriorityParams p;
  const double starved = priority_points(1e12, 3.0 * 86400, p);  // huge service, old
  EXPECT_GE(starved, priority_points(0, 0, p));
}

TEST(Priority, AJobThatUsedMoreGpuTimeRanksBelowANewOne) {
  const PriorityParams p;
  EXPECT_LT(site_factor(2 * 120, 60, p), site_factor(0, 0, p));
}

TEST(Priority, SiteFactorRoundsAndCaps) {
  const PriorityParams p;
  EXPECT_EQ(site_factor(0, 0, p), 100000u);
  EXPECT_EQ(site_factor(0, 1e15, p), 2000000000u);
}

TEST(Priority, QueueKeyKeepsTheOrderOfPendingJobs) {
  const PriorityParams p;
  std::mt19937_64 rng(7);
  struct J {
    double attained, eligible, waited;
  };
  std::vector<J> jobs;
  for (int i = 0; i < 200; ++i) {
    jobs.push_back({static_cast<double>(rng() % 1000000), static_cast<double>(rng() % 500000),
                    static_cast<double>(rng() % 100000)});
  }
  for (const double now : {500000.0, 900000.0, 5e6}) {
    auto by_key = jobs;
    auto by_points = jobs;
    std::sort(by_key.begin(), by_key.end(), [&](const J& a, const J& b) {
      return queue_key(a.attained, a.eligible - a.waited, p) >
             queue_key(b.attained, b.eligible - b.waited, p);
    });
    std::sort(by_points.begin(), by_points.end(), [&](const J& a, const J& b) {
      return priority_points(a.attained, a.waited + now - a.eligible, p) >
             priority_points(b.attained, b.waited + now - b.eligible, p);
    });
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      EXPECT_DOUBLE_EQ(by_key[i].attained, by_points[i].attained) << i;
      EXPECT_DOUBLE_EQ(by_key[i].eligible, by_points[i].eligible) << i;
    }
  }
}

TEST(PriorityQueues, ParsesThresholdsAndTheStarvationFactor) {
  const auto p = parse_priority_params("queues=1h:8h,starve=4");
  EXPECT_EQ(p.queues, (std::vector<double>{3600, 28800}));
  EXPECT_DOUBLE_EQ(p.starve_factor, 4);
  EXPECT_TRUE(p.discretized());
  const auto continuous = parse_priority_params("queues=none,starve=0");
  EXPECT_FALSE(continuous.discretized());
  EXPECT_DOUBLE_EQ(continuous.starve_factor, 0);
  // The defaults: queues=auto, starve=16 (PriorityParams' own: the continuous LAS).
  const auto d = parse_priority_params("");
  EXPECT_TRUE(d.discretized());
  EXPECT_EQ(d.queue_percentiles, (std::vector<double>{50, 95}));
  EXPECT_DOUBLE_EQ(d.starve_factor, 16);
  EXPECT_FALSE(PriorityParams{}.discretized());
  EXPECT_NE(error_of("queues=8h:1h").find("ascending"), std::string::npos);
  EXPECT_NE(error_of("queues=").find("queues"), std::string::npos);
  EXPECT_NE(error_of("starve=x").find("starve"), std::string::npos);
}

TEST(PriorityQueues, AJobIsInTheQueueOfTheThresholdsItHasPassed) {
  const auto p = parse_priority_params("queues=1000s:100000s");
  EXPECT_EQ(service_queue(0, p), 0u);
  EXPECT_EQ(service_queue(999, p), 0u);
  EXPECT_EQ(service_queue(1000, p), 1u);
  EXPECT_EQ(service_queue(99999, p), 1u);
  EXPECT_EQ(service_queue(1e9, p), 2u);
}

TEST(PriorityQueues, TheStarvationGuardPromotesAfterSeveralTimesTheRunTime) {
  auto p = parse_priority_params("queues=1000s:100000s,starve=3");
  // 4 GPUs, 2000 GPU-s: 500 s of run time; starving after 1500 s of waiting.
  EXPECT_EQ(pending_queue(2000, 1499, 4, p), 1u);
  EXPECT_EQ(pending_queue(2000, 1500, 4, p), 0u);
  EXPECT_DOUBLE_EQ(starving_after(500, p), 1500);
  p.starve_factor = 0;  // off
  EXPECT_EQ(pending_queue(2000, 1e9, 4, p), 1u);
}

TEST(PriorityQueues, SiteFactorsOrderByQueueThenByWait) {
  const auto p = parse_priority_params("queues=1000s:100000s,age_period=1d,starve=0");
  // A job that has waited long in a lower queue still ranks below a new one above it.
  const auto q0_new = site_factor(0, 0, p, 4);
  const auto q1_old = site_factor(2000, 1e7, p, 4);
  const auto q1_new = site_factor(2000, 0, p, 4);
  EXPECT_GT(q0_new, q1_old);
  EXPECT_GT(q1_old, q1_new);
  EXPECT_EQ(queue_of_points(q0_new, p), 0u);
  EXPECT_EQ(queue_of_points(q1_old, p), 1u);
  EXPECT_EQ(queue_of_points(q1_new, p), 1u);
  EXPECT_EQ(queue_of_points(site_factor(1e9, 5e6, p, 4), p), 2u);
}

// One user's jobs, ended one second apart.
FinishedJobs of_one_user(const std::vector<double>& gpu_s) {
  FinishedJobs f;
  for (const double g : gpu_s) {
    const auto id = static_cast<std::uint32_t>(f.size() + 1);
    f.add({id, 1000, g, id});
  }
  return f;
}

TEST(PriorityQueues, PercentilesAdaptToTheFinishedJobs) {
  const auto p = parse_priority_params("queues=auto,starve=4");
  EXPECT_EQ(p.queue_percentiles, (std::vector<double>{50, 95}));
  EXPECT_EQ(parse_priority_params("queues=p25:p75:p99").queue_percentiles,
            (std::vector<double>{25, 75, 99}));
  // One queue (infinite thresholds, as many as asked) until enough jobs have finished.
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(p.discretized());
  EXPECT_EQ(p.queue_count(), 3u);
  EXPECT_EQ(p.queues, (std::vector<double>{inf, inf}));
  std::vector<double> finished;
  for (int i = 1; i < static_cast<int>(kAdaptMinJobs); ++i) finished.push_back(i * 100.0);
  EXPECT_EQ(adapted_queues(of_one_user(finished), p), (std::vector<double>{inf, inf}));
  // Nearest rank over 20 jobs (any order): the 10th and the 19th smallest.
  finished.clear();
  for (int i = 20; i >= 1; --i) finished.push_back(i * 100.0);
  EXPECT_EQ(adapted_queues(of_one_user(finished), p), (std::vector<double>{1000, 1900}));
  // At least one GPU-second: jobs that ran no time do not make a threshold of 0.
  EXPECT_EQ(adapted_queues(of_one_user(std::vector<double>(20, 0.0)), p),
            (std::vector<double>{1, 1}));
  // Fixed thresholds stay as given.
  const auto fixed = parse_priority_params("queues=1h:8h");
  EXPECT_TRUE(fixed.queue_percentiles.empty());
  EXPECT_EQ(adapted_queues(of_one_user(finished), fixed), fixed.queues);
}

// A user who floods the cluster with tiny jobs moves the thresholds no more than any
// other user does: each user's jobs weigh as one user.
TEST(PriorityQueues, EveryUserWeighsTheSame) {
  const auto p = parse_priority_params("queues=p50:p95");
  FinishedJobs f;
  std::uint32_t id = 0;
  // Two users whose jobs had 100-1000 and 1100-2000 GPU-seconds.
  for (std::uint32_t user : {1u, 2u}) {
    for (int k = 1; k <= 10; ++k) f.add({++id, user, (user - 1) * 1000.0 + k * 100.0, id});
  }
  EXPECT_EQ(adapted_queues(f, p), (std::vector<double>{1000, 1900}));
  // A third floods the window with 500 one-second jobs. Counted per job, they would be
  // 96% of the window and both thresholds 1 GPU-second; as a third of the weight, they
  // move the median to the first user's 5th job and the 95th percentile not at all.
  for (int k = 0; k < 500; ++k) f.add({++id, 3, 1, id});
  EXPECT_EQ(adapted_queues(f, p), (std::vector<double>{500, 1900}));
  // The same with one user's 10 jobs: no user counts more for running more.
  FinishedJobs fair;
  id = 0;
  for (std::uint32_t user : {1u, 2u}) {
    for (int k = 1; k <= 10; ++k) fair.add({++id, user, (user - 1) * 1000.0 + k * 100.0, id});
  }
  for (int k = 0; k < 10; ++k) fair.add({++id, 3, 1, id});
  EXPECT_EQ(adapted_queues(fair, p), adapted_queues(f, p));
}

TEST(PriorityQueues, AFullWindowDropsTheOldestJobOfItsLargestUser) {
  FinishedJobs f;
  std::uint32_t id = 0;
  for (int k = 0; k < 10; ++k) f.add({++id, 1, 100, id});  // an honest user's jobs
  // Another user's flood fills the window and then pushes out only its own jobs.
  for (std::size_t k = 0; k < 3 * kAdaptWindow; ++k) f.add({++id, 2, 1, id});
  EXPECT_EQ(f.size(), kAdaptWindow);
  EXPECT_EQ(f.jobs_of(1), 10u);
  EXPECT_EQ(f.jobs_of(2), kAdaptWindow - 10);
  EXPECT_EQ(f.jobs().back().id, id);
  // The honest user's new jobs push out the flood's, oldest first.
  const auto flood_oldest = f.jobs()[10].id;
  f.add({++id, 1, 100, id});
  EXPECT_EQ(f.jobs_of(1), 11u);
  EXPECT_NE(f.jobs()[10].id, flood_oldest);
  // Each job once.
  EXPECT_FALSE(f.add({id, 1, 100, id}));
  EXPECT_EQ(f.jobs_of(1), 11u);
}

TEST(PriorityQueues, TheWindowForgetsJobsOlderThanTwoWeeks) {
  FinishedJobs f;
  f.add({1, 1, 100, 0});
  f.add({2, 2, 100, kAdaptMaxAge});
  EXPECT_EQ(f.size(), 2u);
  f.add({3, 2, 100, kAdaptMaxAge + 1});  // the first job is now too old
  EXPECT_EQ(f.size(), 2u);
  EXPECT_EQ(f.jobs_of(1), 0u);
  EXPECT_EQ(f.users(), 1u);
}

// site_factor/dl takes the thresholds again only when the window has taken a job since.
TEST(PriorityQueues, TheWindowCountsTheJobsItTook) {
  FinishedJobs f;
  EXPECT_EQ(f.added(), 0u);
  f.add({1, 1, 100, 0});
  f.add({2, 1, 100, 1});
  EXPECT_EQ(f.added(), 2u);
  f.add({2, 1, 100, 2});  // seen again at the next sample
  EXPECT_EQ(f.added(), 2u);
  for (std::uint32_t id = 3; id <= kAdaptWindow + 10; ++id) f.add({id, 1, 100, id});
  EXPECT_EQ(f.size(), kAdaptWindow);
  EXPECT_EQ(f.added(), kAdaptWindow + 10);
}

TEST(PriorityQueues, PercentileErrorsNameTheParameter) {
  EXPECT_NE(error_of("queues=p50:1h").find("either all durations or all percentiles"),
            std::string::npos);
  EXPECT_NE(error_of("queues=1h:p50").find("either all durations or all percentiles"),
            std::string::npos);
  EXPECT_NE(error_of("queues=p95:p50").find("ascending"), std::string::npos);
  EXPECT_NE(error_of("queues=p100").find("queues"), std::string::npos);
  EXPECT_NE(error_of("queues=p0").find("queues"), std::string::npos);
  EXPECT_NE(error_of("queues=pX").find("queues"), std::string::npos);
  EXPECT_NE(error_of("queues=automatic").find("queues"), std::string::npos);
}

TEST(Priority, ReshapeIsOffUnlessAsked) {
  EXPECT_FALSE(parse_priority_params("").reshape);
  EXPECT_TRUE(parse_priority_params("queues=1h,reshape=yes").reshape);
  EXPECT_FALSE(parse_priority_params("reshape=no").reshape);
}

}  // namespace
}  // namespace dl
