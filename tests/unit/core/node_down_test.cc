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
  EXPECT_FALSE(known_down(n));
  EXPECT_EQ(parse_node_line("node7.cluster|6818|mixed+drain|").states,
            (std::vector<std::string>{"mixed", "drain"}));
}

TEST(NodeDown, OnlyDownIsKnownToSlurmAlready) {
  EXPECT_TRUE(known_down(parse_node_line("10.0.0.2|6818|down+drain|")));
  // Not responding to slurmctld's pings: a slurmd busy with a user's idle connections
  // looks the same, so it is not taken as evidence.
  EXPECT_FALSE(known_down(parse_node_line("10.0.0.2|6818|allocated+not_responding|")));
  EXPECT_FALSE(known_down(parse_node_line("10.0.0.2|6818|allocated+drain|")));
  // "down" only as a whole state: a word that contains it is not one.
  EXPECT_FALSE(known_down(parse_node_line("10.0.0.2|6818|powered_down|")));
}

TEST(NodeDown, RejectsAnythingElse) {
  for (const char* bad :
       {"", "\n", "127.0.0.1|30001|", "127.0.0.1|30001|idle", "127.0.0.1|0|idle|",
        "127.0.0.1|65536|idle|", "127.0.0.1|x|idle|", "|30001|idle|", "127.0.0.1|30001||",
        "127.0.0.1|30001|idle+|", "127.0.0.1|30001|+idle|", "127.0.0.1|30001|idle|extra|"}) {
    EXPECT_THROW(parse_node_line(bad), InputError) << bad;
  }
}

TEST(NodeDown, ProbesJudgeByTheLastRunOfAnswersOrRefusals) {
  using V = ProbeVerdict;
  constexpr net::Reach a = net::Reach::answered;
  constexpr net::Reach r = net::Reach::refused;
  EXPECT_EQ(judge_probes({}), V::undecided);
  EXPECT_EQ(judge_probes({r}), V::undecided);
  EXPECT_EQ(judge_probes({r, r}), V::undecided);
  EXPECT_EQ(judge_probes({r, r, r}), V::dead);
  EXPECT_EQ(judge_probes({a}), V::undecided);
  EXPECT_EQ(judge_probes({a, a}), V::alive);
  // A dying node: its slurmd still accepted the first connection.
  EXPECT_EQ(judge_probes({a, r}), V::undecided);
  EXPECT_EQ(judge_probes({a, r, r, r}), V::dead);
  // A refusal among answers (a slurmd restarting) does not count against it.
  EXPECT_EQ(judge_probes({r, r, a}), V::undecided);
  EXPECT_EQ(judge_probes({r, r, a, a}), V::alive);
  EXPECT_EQ(judge_probes({r, a, r, r}), V::undecided);
}

TEST(NodeDown, SilenceNeverDecides) {
  using V = ProbeVerdict;
  constexpr net::Reach a = net::Reach::answered;
  constexpr net::Reach r = net::Reach::refused;
  constexpr net::Reach s = net::Reach::silent;
  // A listen queue filled by a user's idle connections: no answer in time, every time.
  EXPECT_EQ(judge_probes(std::vector<net::Reach>(kMaxProbes, s)), V::undecided);
  EXPECT_EQ(judge_probes({r, r, s}), V::undecided);
  EXPECT_EQ(judge_probes({r, s, r, r}), V::undecided);
  EXPECT_EQ(judge_probes({s, r, r, r}), V::dead);
  EXPECT_EQ(judge_probes({a, s, a}), V::undecided);
}

TEST(NodeDown, TheReasonNamesTheJobTheNodesAndTheEvidence) {
  EXPECT_EQ(batch_host_down_reason(4711, parse_node_line("127.0.0.1|6818|mixed|"), "n2", 3),
            "slurm-dl: job 4711: batch host lost the job's ranks and its slurmd "
            "(127.0.0.1:6818) refused n2 3 times");
}

}  // namespace
}  // namespace dl
