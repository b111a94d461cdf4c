#include "launcher/recovery.h"

#include <gtest/gtest.h>

#include "launcher/jobs_view.h"
#include "launcher/status.h"

namespace dl {
namespace {

TEST(StepExit, OnlyDlrunsOwnStopCodesAreStops) {
  EXPECT_EQ(classify_step_exit(0), StepEnd::completed);
  EXPECT_EQ(classify_step_exit(75), StepEnd::stopped);
  EXPECT_EQ(classify_step_exit(143), StepEnd::stopped);
  EXPECT_EQ(classify_step_exit(kExitRestartStep), StepEnd::failed);
  EXPECT_EQ(classify_step_exit(1), StepEnd::failed);
  EXPECT_EQ(classify_step_exit(137), StepEnd::failed);
}

const StepShape kFour{{"n1", "n2", "n3", "n4"}, 2};

TEST(RecoveryPlan, NoDeadNodeRestartsOnTheSameShape) {
  const RecoveryPlan p = plan_recovery(kFour, {}, std::nullopt);
  EXPECT_TRUE(p.in_allocation);
  EXPECT_EQ(p.shape.nodes, kFour.nodes);
  EXPECT_EQ(p.shape.tasks_per_node, 2u);
  EXPECT_TRUE(p.dead.empty());
}

TEST(RecoveryPlan, DeadNodesOutsideTheShapeDoNotCount) {
  const RecoveryPlan p = plan_recovery(kFour, {"n9"}, std::nullopt);
  EXPECT_TRUE(p.in_allocation);
  EXPECT_TRUE(p.dead.empty());
}

TEST(RecoveryPlan, AnElasticJobShrinksWithinItsRange) {
  const RecoveryPlan p = plan_recovery(kFour, {"n3"}, RankRange{4, 8});
  EXPECT_TRUE(p.in_allocation);
  EXPECT_EQ(p.shape.nodes, (std::vector<std::string>{"n1", "n2", "n4"}));
  EXPECT_EQ(p.dead, std::vector<std::string>{"n3"});
  EXPECT_NE(p.why.find("6 rank(s)"), std::string::npos) << p.why;
}

TEST(RecoveryPlan, BelowTheElasticMinimumItIsRequeued) {
  const RecoveryPlan p = plan_recovery(kFour, {"n3", "n1", "n4"}, RankRange{4, 8});
  EXPECT_FALSE(p.in_allocation);
  EXPECT_EQ(p.dead, (std::vector<std::string>{"n1", "n3", "n4"}));
  EXPECT_NE(p.why.find("--dl-elastic=4:8"), std::string::npos) << p.why;
}

TEST(RecoveryPlan, AJobThatIsNotElasticIsRequeuedWithoutTheNode) {
  const RecoveryPlan p = plan_recovery(kFour, {"n2"}, std::nullopt);
  EXPECT_FALSE(p.in_allocation);
  EXPECT_EQ(p.dead, std::vector<std::string>{"n2"});
  EXPECT_NE(p.why.find("not elastic"), std::string::npos) << p.why;
}

TEST(RecoveryPlan, NoNodeLeft) {
  const RecoveryPlan p = plan_recovery({{"n1"}, 2}, {"n1"}, RankRange{1, 8});
  EXPECT_FALSE(p.in_allocation);
  EXPECT_NE(p.why.find("no node is left"), std::string::npos) << p.why;
}

TEST(StepShapeOptions, SpellsTheShapeOut) {
  EXPECT_EQ(step_shape_options({{"n1", "n4"}, 2}),
            (std::vector<std::string>{"-N2", "-n4", "--ntasks-per-node=2", "--nodelist=n1,n4"}));
}

TEST(TasksPerNode, FirstNodeOfSlurmsCompressedForm) {
  EXPECT_EQ(first_node_tasks("2(x3)"), 2u);
  EXPECT_EQ(first_node_tasks("4"), 4u);
  EXPECT_EQ(first_node_tasks("2(x2),1"), 2u);
  EXPECT_EQ(first_node_tasks(""), std::nullopt);
  EXPECT_EQ(first_node_tasks("x"), std::nullopt);
  EXPECT_EQ(first_node_tasks("0"), std::nullopt);
  EXPECT_EQ(first_node_tasks("99999999999"), std::nullopt);
}

TEST(LostNodeReport, OnlyTheKeyAndANodeNameCount) {
  const std::string key(64, 'a');
  EXPECT_EQ(format_lost_node(key, "n2"), "LOST " + key + " n2\n");
  EXPECT_EQ(parse_lost_node("LOST " + key + " n2", key), "n2");
  EXPECT_EQ(parse_lost_node("LOST " + key + " node-7.rack_1", key), "node-7.rack_1");
  EXPECT_EQ(parse_lost_node("LOST " + std::string(64, 'b') + " n2", key), std::nullopt)
      << "another key";
  EXPECT_EQ(parse_lost_node("LOST " + key + " ", key), std::nullopt);
  EXPECT_EQ(parse_lost_node("LOST " + key + " n2 n3", key), std::nullopt);
  EXPECT_EQ(parse_lost_node("LOST " + key + " ../n2", key), std::nullopt);
  EXPECT_EQ(parse_lost_node("HELLO " + key + " n2", key), std::nullopt);
  EXPECT_EQ(parse_lost_node("LOST " + key, key), std::nullopt);
  EXPECT_EQ(parse_lost_node("", key), std::nullopt);
}

TEST(RecoveryStatus, ARestartIsAPhaseOfItsOwn) {
  Status s;
  s.phase = JobPhase::restarting;
  s.detail = "step failed (exit code 76); restart 1 of 3 after a failure";
  EXPECT_EQ(format_status(s),
            "RESTARTING: step failed (exit code 76); restart 1 of 3 after a failure");
  EXPECT_STREQ(tracking_event(JobPhase::restarting), "restarting");
  // dl-jobs reads it back from the job comment.
  const auto back = parse_status("dl | " + format_status(s));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->phase, JobPhase::restarting);
}

}  // namespace
}  // namespace dl
