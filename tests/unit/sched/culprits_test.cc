#include "sched/culprits.h"

#include <gtest/gtest.h>

namespace dl::sched {
namespace {

RunRecord run_on(std::uint32_t run, std::vector<std::string> failed_on = {"n2"},
                 std::vector<std::string> not_responding = {}) {
  return RunRecord{42, run, {"n1", "n2"}, std::move(failed_on), std::move(not_responding)};
}

VerifiedFailure verified(std::uint32_t run, const std::string& node, bool hang = true) {
  const auto f = verify_claim(CulpritClaim{42, run, node, hang},
                              RunRecord{42, run, {"n1", "n2", "n3"}, {node}, {}});
  EXPECT_TRUE(f);
  return *f;
}

TEST(Culprits, AClaimSlurmctldBearsOutIsVerifiedWithItsOwnEvidence) {
  const auto f = verify_claim(CulpritClaim{42, 1, "n2", true}, run_on(1));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->node, "n2");
  EXPECT_EQ(f->evidence, "a step of run 1 ended abnormally on n2");
  const auto silent = verify_claim(CulpritClaim{42, 1, "n2", false}, run_on(1, {}, {"n2"}));
  ASSERT_TRUE(silent);
  EXPECT_EQ(silent->evidence, "n2 stopped responding in run 1");
}

TEST(Culprits, HostileClaimsAreRejected) {
  // A node outside the run's allocation: a user cannot point at an arbitrary node.
  EXPECT_FALSE(verify_claim(CulpritClaim{42, 1, "n7", true}, run_on(1, {"n7"})));
  // A node of the run where slurmctld saw nothing go wrong.
  EXPECT_FALSE(verify_claim(CulpritClaim{42, 1, "n1", true}, run_on(1)));
  // Another job's or another run's record.
  EXPECT_FALSE(verify_claim(CulpritClaim{43, 1, "n2", true}, run_on(1)));
  EXPECT_FALSE(verify_claim(CulpritClaim{42, 2, "n2", true}, run_on(1)));
  // Names that Slurm never gives, e.g. text meant for the drain reason.
  for (const char* name : {"", "n2 evil", "n2;x", "n2\n", "n[1-4]", "n1,n2"}) {
    EXPECT_FALSE(valid_node_name(name)) << name;
    EXPECT_FALSE(
        verify_claim(CulpritClaim{42, 1, name, true}, RunRecord{42, 1, {name}, {name}, {name}}))
        << name;
  }
  EXPECT_FALSE(valid_node_name(std::string(65, 'n')));
  EXPECT_TRUE(valid_node_name("gpu-node_01.rack2"));
}

TEST(Culprits, TheSameNodeTwiceInARowIsDrainedOnceWithTheJobAndTheEvidence) {
  CulpritHistory h;
  EXPECT_FALSE(h.record(verified(0, "n2")));
  const auto d = h.record(verified(1, "n2", false));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->node, "n2");
  EXPECT_EQ(d->reason,
            "slurm-dl: job 42: a step of run 0 ended abnormally on n2 (hang); a step of run 1 "
            "ended abnormally on n2 (failure)");
  // The same run reported again does not drain twice.
  EXPECT_FALSE(h.record(verified(1, "n2")));
  // A third failure on the node: the last two again name it.
  EXPECT_TRUE(h.record(verified(2, "n2")));
}

TEST(Culprits, DifferentNodesOrAnOlderRunDoNotDrain) {
  CulpritHistory h;
  EXPECT_FALSE(h.record(verified(0, "n2")));
  EXPECT_FALSE(h.record(verified(1, "n3")));
  EXPECT_FALSE(h.record(verified(2, "n2")));  // n3 came between
  EXPECT_FALSE(h.record(verified(1, "n2")));  // late news of run 1 changes nothing
  EXPECT_TRUE(h.record(verified(3, "n2")));
}

TEST(Culprits, JobsAreKeptApartAndForgotten) {
  CulpritHistory h;
  auto other = verified(0, "n2");
  other.job_id = 7;
  EXPECT_FALSE(h.record(verified(0, "n2")));
  EXPECT_FALSE(h.record(other));  // one failure of each job: no drain
  EXPECT_EQ(h.jobs(), 2u);
  h.forget(42);
  EXPECT_EQ(h.jobs(), 1u);
  EXPECT_FALSE(h.record(verified(1, "n2")));  // job 42's history started again
}

}  // namespace
}  // namespace dl::sched
