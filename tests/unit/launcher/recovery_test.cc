#include "launcher/recovery.h"

#include <gtest/gtest.h>

#include "core/error.h"
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

TEST(RunEndReport, OnlyTheKeyAndAnExitCodeCount) {
  const std::string key(64, 'a');
  EXPECT_EQ(format_run_end(key, 143), "ENDED " + key + " 143\n");
  EXPECT_EQ(parse_run_end("ENDED " + key + " 143", key), 143);
  EXPECT_EQ(parse_run_end("ENDED " + key + " 0", key), 0);
  EXPECT_EQ(parse_run_end("ENDED " + std::string(64, 'b') + " 143", key), std::nullopt)
      << "another key";
  EXPECT_EQ(parse_run_end("ENDED " + key + " ", key), std::nullopt);
  EXPECT_EQ(parse_run_end("ENDED " + key + " 256", key), std::nullopt);
  EXPECT_EQ(parse_run_end("ENDED " + key + " -1", key), std::nullopt);
  EXPECT_EQ(parse_run_end("ENDED " + key + " 1430", key), std::nullopt);
  EXPECT_EQ(parse_run_end("ENDED " + key + " 75 1", key), std::nullopt);
  EXPECT_EQ(parse_run_end("LOST " + key + " 143", key), std::nullopt);
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

namespace dl {
namespace {

const Culprit kHungOnN2{"n2", 1, CulpritKind::hung};
const Culprit kFailedOnN2{"n2", 1, CulpritKind::failed};
const Culprit kFailedOnN3{"n3", 2, CulpritKind::failed};

TEST(Culprits, TheSameNodeTwiceInARowIsExcluded) {
  const CulpritVerdict first = judge_culprit({}, kHungOnN2);
  EXPECT_FALSE(first.exclude);
  EXPECT_TRUE(first.why.empty());
  EXPECT_EQ(first.recent, std::vector<Culprit>{kHungOnN2});
  const CulpritVerdict second = judge_culprit(first.recent, kFailedOnN2);
  ASSERT_TRUE(second.exclude);
  EXPECT_EQ(*second.exclude, "n2");
  EXPECT_EQ(second.why,
            "node n2 caused the last two failures (rank 1 on n2 hung; rank 1 on n2 failed); "
            "excluded");
  // The record starts afresh: one more failure there is not yet a second exclusion.
  EXPECT_TRUE(second.recent.empty());
  EXPECT_FALSE(judge_culprit(second.recent, kFailedOnN2).exclude);
}

TEST(Culprits, DifferentNodesOrAnUnknownCauseBreakTheChain) {
  const CulpritVerdict a = judge_culprit({kFailedOnN2}, kFailedOnN3);
  EXPECT_FALSE(a.exclude);
  EXPECT_EQ(a.recent, std::vector<Culprit>{kFailedOnN3});
  const CulpritVerdict b = judge_culprit({kFailedOnN2}, std::nullopt);
  EXPECT_FALSE(b.exclude);
  EXPECT_TRUE(b.recent.empty());
  EXPECT_FALSE(judge_culprit(b.recent, kFailedOnN2).exclude);
  // Two unknown causes are no node's.
  EXPECT_FALSE(judge_culprit({Culprit{}}, std::nullopt).exclude);
  // Only the newest earlier culprit counts.
  EXPECT_TRUE(judge_culprit({kFailedOnN3, kFailedOnN2}, kHungOnN2).exclude);
  EXPECT_FALSE(judge_culprit({kFailedOnN2, kFailedOnN3}, kHungOnN2).exclude);
}

TEST(Culprits, TheHistoryKeepsThemAndReadsTheOlderForms) {
  RestartHistory h{3, 1, 1200, {kHungOnN2, Culprit{}}};
  EXPECT_EQ(encode_history(h), "failures=3 stalled=1 ckpt=1200 culprits=n2/1/hung,-\n");
  const RestartHistory back = decode_history(encode_history(h));
  EXPECT_EQ(back.culprits, h.culprits);
  EXPECT_EQ(back.ckpt, 1200);
  h.ckpt.reset();
  EXPECT_EQ(decode_history(encode_history(h)).culprits, h.culprits);
  EXPECT_TRUE(decode_history("failures=2 stalled=1 ckpt=5\n").culprits.empty());
  EXPECT_TRUE(decode_history("failures=2 stalled=1\n").culprits.empty());
  for (const char* bad :
       {"failures=1 stalled=0 culprits=", "failures=1 stalled=0 culprits=n2/1",
        "failures=1 stalled=0 culprits=n2/x/hung", "failures=1 stalled=0 culprits=n2/1/slow",
        "failures=1 stalled=0 culprits=../x/1/hung", "failures=1 stalled=0 culprits=n$/1/hung",
        "failures=1 stalled=0 ckpt=3 culprits=n2/1/hung extra=1",
        "failures=1 stalled=0 culprits=n2/1/hung ckpt=3",
        "failures=1 stalled=0 culprits=a/1/lost,a/1/lost,a/1/lost,a/1/lost,a/1/lost,a/1/lost,"
        "a/1/lost,a/1/lost,a/1/lost"}) {
    EXPECT_THROW(decode_history(bad), InputError) << bad;
  }
}

TEST(Culprits, TheReportToTheLauncherNeedsItsKeyAndANodeName) {
  const std::string line = format_culprit("k3y", kHungOnN2);
  EXPECT_EQ(line, "CULPRIT k3y n2/1/hung\n");
  EXPECT_EQ(parse_culprit(line.substr(0, line.size() - 1), "k3y"), kHungOnN2);
  EXPECT_EQ(parse_culprit("CULPRIT k3y n3/2/lost", "k3y"), (Culprit{"n3", 2, CulpritKind::lost}));
  EXPECT_FALSE(parse_culprit("CULPRIT bad n2/1/hung", "k3y"));
  EXPECT_FALSE(parse_culprit("CULPRIT k3y -", "k3y"));
  EXPECT_FALSE(parse_culprit("CULPRIT k3y n2/1/hung,n2/1/hung", "k3y"));
  EXPECT_FALSE(parse_culprit("CULPRIT k3y n2/1/hung extra", "k3y"));
  EXPECT_FALSE(parse_culprit("LOST k3y n2", "k3y"));
  EXPECT_FALSE(parse_lost_node("CULPRIT k3y n2/1/hung", "k3y"));
}

}  // namespace
}  // namespace dl

namespace dl {
namespace {

TEST(RecoveryPlan, AnExcludedNodeIsNamedAsSuch) {
  const RecoveryPlan p = plan_recovery(kFour, {"n2"}, std::nullopt, "is excluded");
  EXPECT_FALSE(p.in_allocation);
  EXPECT_EQ(p.why,
            "node n2 is excluded and the job is not elastic (--dl-elastic), so it cannot run on 6 "
            "rank(s): requeued without it");
  EXPECT_EQ(plan_recovery(kFour, {"n2"}, RankRange{2, 8}, "is excluded").why,
            "node n2 is excluded: restarting on the 3 node(s) left with 6 rank(s)");
}

}  // namespace
}  // namespace dl
