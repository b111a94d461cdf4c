#include "sched/sim/metrics.h"

#include <gtest/gtest.h>

#include <vector>

namespace dl::sim {
namespace {

TEST(Metrics, SummarizeTakesJctPercentilesQueueAndMakespanFromTheOutcomes) {
  struct Case {
    const char* what;
    std::vector<JobOutcome> outcomes;  // id, name, submit, start, end
    double avg, p50, p95, queue, makespan;
  };
  std::vector<JobOutcome> twenty;  // JCTs 10, 20, ..., 200, the longest first
  for (int k = 0; k < 20; ++k) twenty.push_back({0, "", k * 1.0, k + 5.0, k + 200.0 - 10 * k});
  const Case cases[] = {
      {"one job", {{1, "a", 0, 10, 110}}, 110, 110, 110, 10, 110},
      {"p50 and p95 are the ceil(q n)-th smallest",
       {{1, "", 0, 0, 400}, {2, "", 100, 100, 300}, {3, "", 100, 150, 400}, {4, "", 200, 200, 300}},
       250,
       200,
       400,
       12.5,
       400},
      {"twenty jobs", twenty, 105, 100, 190, 5, 200},
  };
  for (const auto& c : cases) {
    const Result r = summarize(c.outcomes, Usage(), 8);
    EXPECT_EQ(r.jobs, c.outcomes.size()) << c.what;
    EXPECT_DOUBLE_EQ(r.avg_jct_s, c.avg) << c.what;
    EXPECT_DOUBLE_EQ(r.p50_jct_s, c.p50) << c.what;
    EXPECT_DOUBLE_EQ(r.p95_jct_s, c.p95) << c.what;
    EXPECT_DOUBLE_EQ(r.avg_queue_s, c.queue) << c.what;
    EXPECT_DOUBLE_EQ(r.makespan_s, c.makespan) << c.what;
    EXPECT_EQ(r.outcomes.size(), c.outcomes.size()) << c.what;
  }
  EXPECT_EQ(summarize({}, Usage(), 8).jobs, 0u);
}

TEST(Metrics, UsageIntegratesBetweenTheFirstAndTheLastSubmit) {
  // 8 GPUs, submits from 0 to 100: a 4-GPU job runs from 0, an 8-GPU job waits from 0
  // (never fits), a 2-GPU job waits from 40 (fits in the 4 free GPUs) and runs from 60.
  Usage u(0, 100);
  u.account(0, 8, 4);
  u.add_used(4);
  u.add_pending(8);
  u.account(40, 4, 2);
  u.add_pending(2);
  u.account(50, 4, 1);  // the 4 free GPUs are on four nodes until 50
  u.account(60, 4, 2);
  u.remove_pending(2);
  u.add_used(2);
  u.account(500, 2, 1);  // past the last submit: not counted
  // Used: 4 x 60 + 6 x 40 = 480 GPU-s; idle while the 2-GPU job fits: 4 x 20; while it
  // fits on one node: 4 x 10.
  EXPECT_DOUBLE_EQ(u.gpu_util(8, 1000), 480.0 / 800);
  EXPECT_DOUBLE_EQ(u.idle_while_fit(8, 1000), 80.0 / 800);
  EXPECT_DOUBLE_EQ(u.idle_while_node_fit(8, 1000), 40.0 / 800);
  // The last job ended before the last submit: over [0, 50] only.
  EXPECT_DOUBLE_EQ(u.gpu_util(8, 50), 480.0 / 400);
}

TEST(Metrics, UsageOfJobsAllSubmittedAtOnceIsOverTheWholeRun) {
  Usage u(5, 5);
  u.account(5, 8, 8);
  u.add_used(8);
  u.account(105, 0, 0);
  u.add_used(-8);
  EXPECT_DOUBLE_EQ(u.gpu_util(8, 105), 1.0);
  EXPECT_DOUBLE_EQ(u.idle_while_fit(8, 105), 0.0);
  EXPECT_EQ(Usage().gpu_util(8, 105), 0.0);
}

}  // namespace
}  // namespace dl::sim
