#include "core/drain.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace dl {
namespace {

TEST(Drain, TwoCulpritStepsInARowDrainOncePerJob) {
  const DrainDecision a = judge_step({}, 4711, 0, true, 2);
  EXPECT_FALSE(a.drain);
  EXPECT_EQ(a.record.culprit_steps, std::vector<std::uint32_t>{0});
  const DrainDecision b = judge_step(a.record, 4711, 1, true, 2);
  EXPECT_TRUE(b.drain);
  EXPECT_TRUE(b.record.drained);
  EXPECT_EQ(b.reason,
            "slurm-dl: job 4711: steps 0,1 ended with this node as the culprit (dlrun exit 77)");
  // Never twice for one job.
  const DrainDecision c = judge_step(b.record, 4711, 2, true, 2);
  EXPECT_FALSE(c.drain);
  EXPECT_FALSE(judge_step(c.record, 4711, 3, true, 2).drain);
}

TEST(Drain, AStepThatWasNotTheCulpritResetsTheCount) {
  const DrainDecision a = judge_step({}, 7, 0, true, 2);
  const DrainDecision b = judge_step(a.record, 7, 1, false, 2);
  EXPECT_FALSE(b.drain);
  EXPECT_TRUE(b.record.culprit_steps.empty());
  EXPECT_FALSE(judge_step(b.record, 7, 2, true, 2).drain);
}

TEST(Drain, AStepThatRanElsewhereInBetweenBreaksTheRow) {
  const DrainDecision a = judge_step({}, 7, 0, true, 2);
  const DrainDecision b = judge_step(a.record, 7, 2, true, 2);
  EXPECT_FALSE(b.drain);
  EXPECT_EQ(b.record.culprit_steps, std::vector<std::uint32_t>{2});
  EXPECT_TRUE(judge_step(b.record, 7, 3, true, 2).drain);
}

TEST(Drain, ZeroNeverDrainsAndThreeNeedsThree) {
  NodeRecord r;
  for (std::uint32_t s = 0; s < 5; ++s) {
    const DrainDecision d = judge_step(r, 7, s, true, 0);
    EXPECT_FALSE(d.drain);
    r = d.record;
  }
  r = {};
  for (std::uint32_t s = 0; s < 2; ++s) r = judge_step(r, 7, s, true, 3).record;
  const DrainDecision d = judge_step(r, 7, 2, true, 3);
  EXPECT_TRUE(d.drain);
  EXPECT_NE(d.reason.find("steps 0,1,2 "), std::string::npos);
}

TEST(Drain, TheRecordRoundTripsAndRefusesGarbage) {
  const NodeRecord r{{3, 4}, true};
  EXPECT_EQ(encode_node_record(r), "culprit_steps=3,4 drained=1\n");
  const NodeRecord back = decode_node_record(encode_node_record(r));
  EXPECT_EQ(back.culprit_steps, r.culprit_steps);
  EXPECT_TRUE(back.drained);
  EXPECT_TRUE(decode_node_record("culprit_steps= drained=0\n").culprit_steps.empty());
  for (const char* bad :
       {"", "culprit_steps=1", "culprit_steps=x drained=0", "culprit_steps=1, drained=0",
        "culprit_steps=1 drained=2", "drained=0 culprit_steps=1"}) {
    EXPECT_THROW(decode_node_record(bad), InputError) << bad;
  }
}

TEST(Drain, RecordNamesArePlainNodeNames) {
  EXPECT_EQ(node_record_name("n2", 33500001), "n2.33500001");
  for (const char* bad : {"", "../n2", "n2/x", ".hidden", "n 2"}) {
    EXPECT_THROW(node_record_name(bad, 1), InputError) << bad;
  }
}

TEST(Drain, ANodeDrainedForTheJobAlreadyForbidsASecond) {
  const std::string others = "n1|Kill task failed\nn7|slurm-dl: job 47: steps 0,1 ended\n";
  EXPECT_TRUE(check_drained_nodes(4711, 0, others).may_drain);
  EXPECT_TRUE(check_drained_nodes(4711, 0, "").may_drain);
  const DrainCheck c = check_drained_nodes(
      4711, 0, others + "n3|slurm-dl: job 4711: steps 3,4 ended with this node as the culprit\n");
  EXPECT_FALSE(c.may_drain);
  EXPECT_EQ(c.why_not, "node n3 was drained for job 4711 already");
  // Only the reason counts: a user's words elsewhere in it do not.
  EXPECT_TRUE(check_drained_nodes(4711, 0, "n3|admin: slurm-dl: job 4711: x\n").may_drain);
}

TEST(Drain, AnUncertainAnswerForbidsDraining) {
  const DrainCheck failed = check_drained_nodes(4711, 1, "");
  EXPECT_FALSE(failed.may_drain);
  EXPECT_EQ(failed.why_not, "sinfo exited with 1");
  const DrainCheck cut = check_drained_nodes(4711, 0, std::string(kMaxDrainedNodesReply + 1, 'x'));
  EXPECT_FALSE(cut.may_drain);
  EXPECT_EQ(cut.why_not, "sinfo's reply is over 1048576 bytes");
  const DrainCheck odd =
      check_drained_nodes(4711, 0, "n1|Kill task failed\nsinfo: error: Socket timed out\n");
  EXPECT_FALSE(odd.may_drain);
  EXPECT_EQ(odd.why_not, "sinfo replied 'sinfo: error: Socket timed out', not '<node>|<reason>'");
  EXPECT_FALSE(check_drained_nodes(4711, 0, "|reason\n").may_drain);
}

}  // namespace
}  // namespace dl
