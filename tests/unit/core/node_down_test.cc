#include "core/node_down.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace dl {
namespace {

TEST(NodeDown, ParsesTheFirstLineOfSinfo) {
  const NodeLine n = parse_node_line("127.0.0.1|30001|idle|\n127.0.0.1|30001|idle|\n");
  EXPECT_EQ(n.address, "127.0.0.1");
  EXPECT_EQ(n.port, 30001);
  EXPECT_EQ(n.states, std::vector<std::string>{"idle"});
  EXPECT_FALSE(known_failed(n));
  EXPECT_EQ(parse_node_line("node7.cluster|6818|mixed+drain|").states,
            (std::vector<std::string>{"mixed", "drain"}));
}

TEST(NodeDown, DownOrNotRespondingIsKnownToSlurmAlready) {
  EXPECT_TRUE(known_failed(parse_node_line("10.0.0.2|6818|down+drain|")));
  EXPECT_TRUE(known_failed(parse_node_line("10.0.0.2|6818|allocated+not_responding|")));
  EXPECT_FALSE(known_failed(parse_node_line("10.0.0.2|6818|allocated+drain|")));
  // "down" only as a whole state: a word that contains it is not one.
  EXPECT_FALSE(known_failed(parse_node_line("10.0.0.2|6818|powered_down|")));
}

TEST(NodeDown, RejectsAnythingElse) {
  for (const char* bad :
       {"", "\n", "127.0.0.1|30001|", "127.0.0.1|30001|idle", "127.0.0.1|0|idle|",
        "127.0.0.1|65536|idle|", "127.0.0.1|x|idle|", "|30001|idle|", "127.0.0.1|30001||",
        "127.0.0.1|30001|idle+|", "127.0.0.1|30001|+idle|", "127.0.0.1|30001|idle|extra|"}) {
    EXPECT_THROW(parse_node_line(bad), InputError) << bad;
  }
}

TEST(NodeDown, ProbesJudgeByTheLastRunOfAnswersOrMisses) {
  using V = ProbeVerdict;
  EXPECT_EQ(judge_probes({}), V::undecided);
  EXPECT_EQ(judge_probes({false}), V::undecided);
  EXPECT_EQ(judge_probes({false, false}), V::undecided);
  EXPECT_EQ(judge_probes({false, false, false}), V::dead);
  EXPECT_EQ(judge_probes({true}), V::undecided);
  EXPECT_EQ(judge_probes({true, true}), V::alive);
  // A dying node: its slurmd still accepted the first connection.
  EXPECT_EQ(judge_probes({true, false}), V::undecided);
  EXPECT_EQ(judge_probes({true, false, false, false}), V::dead);
  // A miss among answers (a slurmd busy for a moment) does not count against it.
  EXPECT_EQ(judge_probes({false, false, true}), V::undecided);
  EXPECT_EQ(judge_probes({false, false, true, true}), V::alive);
  EXPECT_EQ(judge_probes({false, true, false, false}), V::undecided);
}

TEST(NodeDown, TheReasonNamesTheJobTheNodesAndTheEvidence) {
  EXPECT_EQ(batch_host_down_reason(4711, parse_node_line("127.0.0.1|6818|mixed|"), "n2", 3),
            "slurm-dl: job 4711: batch host lost the job's ranks and its slurmd "
            "(127.0.0.1:6818) did not answer n2 3 times");
}

}  // namespace
}  // namespace dl
