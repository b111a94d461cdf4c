#include "sched/gang.h"

#include <gtest/gtest.h>

namespace dl {
namespace {

Capacity nodes(std::uint32_t n, std::uint32_t gpus, std::uint32_t per_switch = 0) {
  Capacity c;
  c.node_gpus.assign(n, gpus);
  for (std::uint32_t k = 0; per_switch && k < n; ++k) {
    if (k % per_switch == 0) c.leaf_switches.emplace_back();
    c.leaf_switches.back().push_back(k);
  }
  return c;
}

Gang pack(std::uint32_t gpus) { return {gpus, Placement::pack, std::nullopt, std::nullopt}; }

Shape shape(std::uint32_t nmin, std::uint32_t nmax, std::uint32_t per, bool excl, bool sw) {
  Shape s;
  s.nodes_min = nmin;
  s.nodes_max = nmax;
  s.gpus_per_node = per;
  s.exclusive = excl;
  s.one_switch = sw;
  return s;
}

std::string shape_error(const Gang& g, const Capacity& c) {
  try {
    fit_gang(g, c, "gpu");
  } catch (const ShapeError& e) {
    return e.what();
  }
  return "(fits)";
}

TEST(Gang, PackKeepsASmallGangOnOneSharedNode) {
  EXPECT_EQ(shape_gang(pack(4), nodes(4, 8)), shape(1, 1, 4, false, false));
  EXPECT_EQ(shape_gang(pack(8), nodes(4, 8)), shape(1, 1, 8, false, false));
  EXPECT_EQ(shape_gang(pack(1), nodes(4, 8)), shape(1, 1, 1, false, false));
}

TEST(Gang, PackGivesALargeGangWholeNodesNeverRagged) {
  EXPECT_EQ(shape_gang(pack(16), nodes(4, 8)), shape(2, 2, 8, true, false));
  EXPECT_EQ(shape_gang(pack(12), nodes(4, 8)), shape(2, 2, 8, true, false));
  EXPECT_EQ(shape_gang(pack(9), nodes(4, 8)), shape(2, 2, 8, true, false));
  EXPECT_EQ(shape_gang(pack(4), nodes(4, 2)), shape(2, 2, 2, true, false));
}

TEST(Gang, SpreadUsesAsManyNodesAsThePartitionHasEvenly) {
  const Gang g4{4, Placement::spread, std::nullopt, std::nullopt};
  EXPECT_EQ(shape_gang(g4, nodes(4, 2)), shape(4, 4, 1, false, false));
  const Gang g6{6, Placement::spread, std::nullopt, std::nullopt};
  EXPECT_EQ(shape_gang(g6, nodes(4, 2)), shape(3, 3, 2, false, false));
  const Gang g2{2, Placement::spread, std::nullopt, std::nullopt};
  EXPECT_EQ(shape_gang(g2, nodes(8, 8)), shape(2, 2, 1, false, false));
}

TEST(Gang, SwitchAsksForOneLeafOnlyWhenItSpansNodes) {
  const Gang big{16, Placement::leaf_switch, std::nullopt, std::nullopt};
  EXPECT_EQ(shape_gang(big, nodes(8, 8, 4)), shape(2, 2, 8, true, true));
  const Gang small{4, Placement::leaf_switch, std::nullopt, std::nullopt};
  EXPECT_EQ(shape_gang(small, nodes(8, 8, 4)), shape(1, 1, 4, false, false));
}

TEST(Gang, ElasticBecomesANodeRangeOfWholeNodes) {
  const Gang e{32, Placement::pack, Elastic{8, 32}, std::nullopt};
  EXPECT_EQ(shape_gang(e, nodes(8, 8)), shape(1, 4, 8, true, false));
  const Gang odd{24, Placement::pack, Elastic{9, 24}, std::nullopt};
  EXPECT_EQ(shape_gang(odd, nodes(8, 8)), shape(2, 3, 8, true, false));
  const Gang one{6, Placement::pack, Elastic{2, 6}, std::nullopt};
  EXPECT_EQ(shape_gang(one, nodes(8, 8)), shape(1, 1, 6, false, false));
  const Gang sw{16, Placement::leaf_switch, Elastic{8, 16}, std::nullopt};
  EXPECT_EQ(shape_gang(sw, nodes(8, 8, 4)), shape(1, 2, 8, true, true));
}

TEST(Gang, ElasticWithSpreadIsAConflict) {
  const Gang e{8, Placement::spread, Elastic{4, 8}, std::nullopt};
  try {
    shape_gang(e, nodes(4, 2));
    FAIL() << "accepted";
  } catch (const InputError& err) {
    EXPECT_STREQ(err.what(),
                 "--dl-elastic=4:8 with --dl-placement=spread: an elastic gang grows by whole "
                 "nodes; use pack or switch");
  }
}

TEST(Gang, ElasticNodeMaximumIsCappedAtThePartition) {
  const Gang e{64, Placement::pack, Elastic{8, 64}, std::nullopt};
  const Shape s = fit_gang(e, nodes(4, 8), "gpu");
  EXPECT_EQ(s, shape(1, 4, 8, true, false));
}

TEST(Gang, ImpossibleShapesNameTheLargestThatRuns) {
  EXPECT_EQ(shape_error(pack(24), nodes(2, 8)),
            "--dl-gpus=24: a pack gang of 3x8 whole nodes can never run in partition gpu "
            "(2 nodes x 8 GPUs); the largest pack gang there is 16 GPUs (2x8)");
  EXPECT_EQ(shape_error(pack(16), nodes(1, 8)),
            "--dl-gpus=16: a pack gang of 2x8 whole nodes can never run in partition gpu "
            "(1 node x 8 GPUs); the largest pack gang there is 8 GPUs (1x8)");
  const Gang sp{9, Placement::spread, std::nullopt, std::nullopt};
  EXPECT_EQ(shape_error(sp, nodes(4, 2)),
            "--dl-gpus=9: a spread gang of 3x3 GPUs can never run in partition gpu "
            "(4 nodes x 2 GPUs); the largest spread gang there is 8 GPUs (4x2)");
  const Gang el{32, Placement::pack, Elastic{24, 32}, std::nullopt};
  EXPECT_EQ(shape_error(el, nodes(2, 8)),
            "--dl-elastic=24:32: an elastic gang of 3-4x8 whole nodes can never run in partition "
            "gpu (2 nodes x 8 GPUs); the largest elastic gang there is 16 GPUs (2x8)");
}

TEST(Gang, SwitchNeedsALeafWithEnoughNodes) {
  const Gang g{24, Placement::leaf_switch, std::nullopt, std::nullopt};
  EXPECT_EQ(shape_error(g, nodes(4, 8, 2)),
            "--dl-gpus=24: a switch gang of 3x8 whole nodes can never run in partition gpu "
            "(4 nodes x 8 GPUs), at most 2 such nodes under one leaf switch; the largest switch "
            "gang there is 16 GPUs (2x8)");
  EXPECT_EQ(shape_error(Gang{16, Placement::leaf_switch, std::nullopt, std::nullopt}, nodes(4, 8)),
            "--dl-gpus=16: a switch gang of 2x8 whole nodes can never run in partition gpu "
            "(4 nodes x 8 GPUs), which has no leaf switches (TopologyPlugin=topology/tree); the "
            "largest switch gang there is 8 GPUs (1x8)");
  EXPECT_EQ(fit_gang(g, nodes(8, 8, 4), "gpu"), shape(3, 3, 8, true, true));
}

TEST(Gang, AnExplicitNodeCountSplitsTheGangEvenly) {
  Gang g = pack(4);
  g.nodes = 2;
  EXPECT_EQ(shape_gang(g, nodes(4, 2)), shape(2, 2, 2, false, false));
  Gang sp{4, Placement::spread, std::nullopt, 2};
  EXPECT_EQ(shape_gang(sp, nodes(4, 2)), shape(2, 2, 2, false, false));
  Gang el{8, Placement::pack, Elastic{4, 8}, 4};
  EXPECT_EQ(shape_gang(el, nodes(4, 2)), shape(4, 4, 2, false, false));
  Gang sw{6, Placement::leaf_switch, std::nullopt, 3};
  EXPECT_EQ(shape_gang(sw, nodes(4, 2, 2)), shape(3, 3, 2, false, true));
  Gang wide = pack(2);
  wide.nodes = 3;
  EXPECT_THROW(shape_gang(wide, nodes(4, 2)), InputError);
  Gang tight = pack(8);
  tight.nodes = 2;
  EXPECT_EQ(shape_error(tight, nodes(4, 2)),
            "--dl-gpus=8 with -N 2: a pack gang of 2x4 GPUs can never run in partition gpu (4 "
            "nodes x 2 GPUs); the largest pack gang there is 4 GPUs (2x2)");
}

TEST(Gang, MixedNodesUseTheLargestAndCountOnlyNodesThatHaveIt) {
  Capacity c;
  c.node_gpus = {8, 8, 4, 4, 0};
  EXPECT_EQ(c.gpus_per_node(), 8u);
  EXPECT_EQ(c.describe(), "5 nodes, 24 GPUs");
  EXPECT_EQ(fit_gang(pack(16), c, "gpu"), shape(2, 2, 8, true, false));
  EXPECT_EQ(shape_error(pack(24), c),
            "--dl-gpus=24: a pack gang of 3x8 whole nodes can never run in partition gpu (5 "
            "nodes, 24 GPUs); the largest pack gang there is 16 GPUs (2x8)");
  // Spread counts the nodes that have GPUs at all.
  EXPECT_EQ(shape_gang(Gang{4, Placement::spread, std::nullopt, std::nullopt}, c),
            shape(4, 4, 1, false, false));
}

TEST(Gang, APartitionWithoutGpusRejectsEveryGang) {
  Capacity c;
  c.node_gpus = {0, 0};
  EXPECT_EQ(shape_error(pack(1), c), "--dl-gpus=1: the partition has no GPUs");
}

TEST(Gang, DescribeIsTheCommentSummary) {
  const auto c = nodes(4, 8, 2);
  EXPECT_EQ(describe(pack(16), shape_gang(pack(16), c), true), "dl: 16 GPUs as 2x8, preemptible");
  EXPECT_EQ(describe(pack(4), shape_gang(pack(4), c), false), "dl: 4 GPUs as 1x4");
  const Gang sp{4, Placement::spread, std::nullopt, std::nullopt};
  EXPECT_EQ(describe(sp, shape_gang(sp, c), false), "dl: 4 GPUs as 4x1 spread");
  const Gang sw{16, Placement::leaf_switch, std::nullopt, std::nullopt};
  EXPECT_EQ(describe(sw, shape_gang(sw, c), false), "dl: 16 GPUs as 2x8 on one switch");
  const Gang el{32, Placement::pack, Elastic{8, 32}, std::nullopt};
  EXPECT_EQ(describe(el, fit_gang(el, c, "gpu"), true),
            "dl: 8-32 GPUs as 1-4x8, elastic, preemptible");
}

TEST(Gang, OneTaskPerGpuUnlessTheUserLaidThemOut) {
  const auto c = nodes(4, 2);  // 4 nodes x 2 GPUs, as the mini-cluster
  const Gang four{4, Placement::pack, std::nullopt, std::nullopt};
  const auto t4 = one_task_per_gpu(four, shape_gang(four, c));
  EXPECT_EQ(t4.per_node, 2u);
  EXPECT_EQ(t4.total, 4u);
  const Gang two{2, Placement::pack, std::nullopt, std::nullopt};
  const auto t2 = one_task_per_gpu(two, shape_gang(two, c));
  EXPECT_EQ(t2.total, 2u);
  EXPECT_FALSE(t2.per_node) << "one node: the total is the layout";
  const Gang three{3, Placement::pack, std::nullopt, std::nullopt};
  const auto t3 = one_task_per_gpu(three, shape_gang(three, c));
  EXPECT_EQ(t3.total, 3u) << "a GPU the gang does not use gets no rank";
  EXPECT_FALSE(t3.per_node) << "2 + 1: no per-node count fits both nodes";
  const Gang el{8, Placement::pack, Elastic{4, 8}, std::nullopt};
  const auto te = one_task_per_gpu(el, fit_gang(el, c, "gpu"));
  EXPECT_FALSE(te.per_node) << "a requeued job would keep its first run's task count";
  EXPECT_FALSE(te.total) << "the node count is Slurm's choice";

  EXPECT_EQ(explicit_tasks(std::nullopt, 1u), "1 task per node");
  EXPECT_EQ(explicit_tasks(2u, std::nullopt), "2 tasks");
  EXPECT_EQ(explicit_tasks(4u, 2u), "4 tasks, 2 per node");
  EXPECT_EQ(explicit_tasks(std::nullopt, std::nullopt), "");
  EXPECT_EQ(describe(four, shape_gang(four, c), false, "1 task per node"),
            "dl: 4 GPUs as 2x2, 1 task per node");

  // sbatch --ntasks-per-node=1 derived 1 task from the 1 node asked: on 2 nodes, 2.
  EXPECT_EQ(tasks_for_per_node(1, 1, 1, shape_gang(four, c)), 2u);
  EXPECT_FALSE(tasks_for_per_node(1, 3, 1, shape_gang(four, c))) << "-n3 given: it stands";
  EXPECT_FALSE(tasks_for_per_node(2, 2, 1, fit_gang(el, c, "gpu"))) << "a node range";
}

TEST(Gang, OfSpecNeedsGpus) {
  Spec s;
  EXPECT_FALSE(Gang::of(s));
  s.gpus = 8;
  s.placement = Placement::spread;
  const auto g = Gang::of(s);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->gpus, 8u);
  EXPECT_EQ(g->placement, Placement::spread);
}

TEST(EvenSplit, SmallGangsStayOnOneNodeLargerOnesSplitEvenlyOnSharedNodes) {
  const auto shape = [](std::uint32_t gpus) { return even_split(gpus, 8); };
  EXPECT_EQ(shape(8).layout(), "1x8");
  EXPECT_EQ(shape(3).layout(), "1x3");
  EXPECT_EQ(shape(16).layout(), "2x8");
  EXPECT_EQ(shape(12).layout(), "2x6");
  EXPECT_EQ(shape(9).layout(), "3x3");
  EXPECT_EQ(shape(11).layout(), "2x6");  // no even split of 11: one GPU held unused
  EXPECT_EQ(shape(24).layout(), "3x8");
  EXPECT_EQ(shape(20).layout(), "4x5");
  // The other even splits, fewest nodes first, within the nodes there are.
  std::vector<std::string> all;
  for (const Shape& s : even_splits(12, 4, 6)) all.push_back(s.layout());
  EXPECT_EQ(all, (std::vector<std::string>{"3x4", "4x3", "6x2"}));
  EXPECT_TRUE(even_splits(16, 4, 3).empty());
  EXPECT_EQ(even_splits(4, 4, 100).size(), 1u);  // a small gang: one node only
  for (std::uint32_t g = 1; g <= 64; ++g) {
    const Shape s = even_split(g, 8);
    for (const Shape& other : even_splits(g, 8, 100)) {
      EXPECT_EQ(other.nodes_min * other.gpus_per_node, s.nodes_min * s.gpus_per_node) << g;
      EXPECT_LE(other.gpus_per_node, 8u) << g;
    }
    EXPECT_FALSE(s.exclusive) << g;
    EXPECT_GE(s.nodes_min * s.gpus_per_node, g) << g;
    EXPECT_LT(s.nodes_min * s.gpus_per_node - g, s.nodes_min) << g;
    if (g <= 8) {
      EXPECT_EQ(s.nodes_min, 1u) << g;
    }
  }
}

TEST(Gang, EvenPlacementIsTheEvenSplitOnSharedNodes) {
  const Gang g12{12, Placement::even, std::nullopt, std::nullopt};
  const Shape s = fit_gang(g12, nodes(4, 8), "p");
  EXPECT_EQ(s.layout(), "2x6");
  EXPECT_FALSE(s.exclusive);
  EXPECT_EQ(describe(g12, s, false), "dl: 12 GPUs as 2x6 even");
  const Gang g12n{12, Placement::even, std::nullopt, 3};
  EXPECT_EQ(describe(g12n, fit_gang(g12n, nodes(4, 8), "p"), false),
            "dl: 12 GPUs as 3x4 even (-N 3)");
  const Gang g3{3, Placement::even, std::nullopt, std::nullopt};
  EXPECT_EQ(fit_gang(g3, nodes(4, 2), "p").layout(), "3x1");
  EXPECT_EQ(
      fit_gang(Gang{6, Placement::even, std::nullopt, std::nullopt}, nodes(4, 8), "p").layout(),
      "1x6");
  try {
    fit_gang(Gang{9, Placement::even, std::nullopt, std::nullopt}, nodes(2, 4), "p");
    FAIL() << "accepted";
  } catch (const ShapeError& err) {
    EXPECT_NE(std::string(err.what()).find("even gang of 3x3"), std::string::npos) << err.what();
  }
}

TEST(Reshape, AGangWhoseSplitDoesNotFitTakesTheFirstOtherSplitThatDoes) {
  // Six 4-GPU nodes with 1 GPU free each (4 CPUs): 6 GPUs as 2x3 do not fit, 6x1 does.
  std::vector<FreeNode> free(6, FreeNode{1, 4});
  const Shape first = even_split(6, 4);
  ASSERT_EQ(first.layout(), "2x3");
  auto other = other_split_that_fits(6, 4, first, free, 1);
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->layout(), "6x1");
  // Its own split fits: it keeps it.
  free[0].gpus = free[1].gpus = 3;
  EXPECT_FALSE(other_split_that_fits(6, 4, first, free, 1).has_value());
  // Too few CPUs for a task per GPU on the nodes with GPUs: 3x2 rather than 2x3.
  free[0].cpus = free[1].cpus = 2;
  free[2].gpus = free[3].gpus = free[4].gpus = 2;
  other = other_split_that_fits(6, 4, first, free, 1);
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->layout(), "3x2");
  // Nothing fits: nothing changes.
  EXPECT_FALSE(other_split_that_fits(6, 4, first, std::vector<FreeNode>(6, FreeNode{0, 4}), 1));
  // A gang on one node has no other split.
  EXPECT_FALSE(
      other_split_that_fits(4, 4, even_split(4, 4), std::vector<FreeNode>(4, FreeNode{1, 4}), 1));
}

TEST(Reshape, TakingAShapeUsesTheNodesWithTheFewestFreeGpusThatHaveEnough) {
  std::vector<FreeNode> free = {{4, 8}, {2, 8}, {1, 8}, {3, 8}};
  Shape s;
  s.nodes_min = s.nodes_max = 2;
  s.gpus_per_node = 2;
  ASSERT_TRUE(fits_now(s, free, 1));
  take(s, free, 1);
  EXPECT_EQ(free[0].gpus, 4u);
  EXPECT_EQ(free[1].gpus, 0u);
  EXPECT_EQ(free[2].gpus, 1u);
  EXPECT_EQ(free[3].gpus, 1u);
  EXPECT_EQ(free[1].cpus, 6u);
  EXPECT_FALSE(fits_now(s, free, 1));
}

// One pass over the waiting jobs in their order, as site_factor/dl and dl-sim run it.
TEST(ReshapePass, JobsStartInOrderReshapedWhenTheirSplitDoesNotFit) {
  // Partition 0: nodes 0-4 (4 GPUs each), 2 free on each; partition 1: node 5, 4 free.
  std::vector<FreeNode> free = {{2, 8}, {2, 8}, {2, 8}, {2, 8}, {2, 8}, {4, 8}};
  ReshapePass pass(free, {{{0, 1, 2, 3, 4}, 4}, {{5}, 4}});
  const auto reshapable = [](std::optional<std::uint32_t> gpus) { return [gpus] { return gpus; }; };
  int asked = 0;
  const auto counted = [&] {
    ++asked;
    return std::optional<std::uint32_t>(8);
  };
  // 2 GPUs on one node fit: they start there (node 0) and nobody is asked whether the
  // job may be reshaped.
  EXPECT_FALSE(pass.next({0, even_split(2, 4), 1}, counted).has_value());
  EXPECT_EQ(asked, 0);
  // 8 GPUs as 2x4 do not fit; as 4x2 they do: a reshape, taking nodes 1-4.
  const auto eight = pass.next({0, even_split(8, 4), 1}, counted);
  ASSERT_TRUE(eight.has_value());
  EXPECT_EQ(eight->layout(), "4x2");
  EXPECT_EQ(asked, 1);
  // Partition 0 is full: nothing more starts there, and nobody is asked (no split of
  // more GPUs than are free fits).
  EXPECT_FALSE(pass.next({0, even_split(2, 4), 1}, reshapable(std::nullopt)).has_value());
  Shape one;
  one.gpus_per_node = 1;
  EXPECT_FALSE(pass.next({0, one, 1}, counted).has_value());
  EXPECT_EQ(asked, 1);
  // Partition 1: 8 GPUs (2x4) do not fit its one node, and it has 4 free: the job waits,
  // unasked; the 4-GPU job behind it starts there.
  EXPECT_FALSE(pass.next({1, even_split(8, 4), 1}, counted).has_value());
  EXPECT_EQ(asked, 1);
  EXPECT_FALSE(pass.next({1, even_split(4, 4), 1}, counted).has_value());
  EXPECT_FALSE(pass.next({1, one, 1}, counted).has_value());
  EXPECT_EQ(asked, 1);
}

// Past a job that waits, as Slurm's backfill scheduler goes: a later job that fits only
// in another split is reshaped (the backfill scheduler then starts it if that delays no
// higher job).
TEST(ReshapePass, AJobBehindOneThatWaitsIsReshaped) {
  // Four 2-GPU nodes, one GPU free on each.
  ReshapePass pass({{1, 8}, {1, 8}, {1, 8}, {1, 8}}, {{{0, 1, 2, 3}, 2}});
  const auto gpus = [](std::uint32_t n) { return [n] { return std::optional<std::uint32_t>(n); }; };
  // 8 GPUs as 4x2: more than the 4 free; it waits and takes nothing.
  EXPECT_FALSE(pass.next({0, even_split(8, 2), 1}, gpus(8)).has_value());
  // 4 GPUs as 2x2 do not fit; as 4x1 they do, on the GPUs the first job waits for.
  const auto four = pass.next({0, even_split(4, 2), 1}, gpus(4));
  ASSERT_TRUE(four.has_value());
  EXPECT_EQ(four->layout(), "4x1");
  // They took them: a third job finds nothing free.
  EXPECT_FALSE(pass.next({0, even_split(4, 2), 1}, gpus(4)).has_value());
}

TEST(ReshapePass, AJobThatStartsTakesItsGpusFromTheLaterJobs) {
  // One partition of two 4-GPU nodes, all free: a 1x4 gang takes node 0; a second one
  // fits on node 1; a 2x2 gang then does not fit, nor does 4x1.
  ReshapePass pass({{4, 8}, {4, 8}}, {{{0, 1}, 4}});
  const auto four = [] { return std::optional<std::uint32_t>(4); };
  EXPECT_FALSE(pass.next({0, even_split(4, 4), 1}, four).has_value());
  EXPECT_FALSE(pass.next({0, even_split(4, 4), 1}, four).has_value());
  Shape two_by_two;
  two_by_two.nodes_min = two_by_two.nodes_max = 2;
  two_by_two.gpus_per_node = 2;
  EXPECT_FALSE(pass.next({0, two_by_two, 1}, four).has_value());
}

TEST(Reshape, OnlyAnEvenGangAsJobSubmitShapedItAndExactlyItsGpus) {
  Shape s;
  s.nodes_min = s.nodes_max = 2;
  s.gpus_per_node = 2;
  EXPECT_EQ(reshape_note("dl: 4 GPUs as 2x2 even", 4, false, s), "");
  EXPECT_EQ(reshape_note("dl: 4 GPUs as 2x2 even, preemptible | RUNNING step 3", 4, true, s), "");
  EXPECT_EQ(reshape_note("dl: 4 GPUs as 2x2 even (reshaped from 4x1)", 4, false, s),
            " (reshaped from 4x1)");
  // -N, an explicit task layout, another placement, a stale or edited comment: no.
  EXPECT_FALSE(reshape_note("dl: 4 GPUs as 2x2 even (-N 2)", 4, false, s));
  EXPECT_FALSE(reshape_note("dl: 4 GPUs as 2x2 even, 1 task per node", 4, false, s));
  EXPECT_FALSE(reshape_note("dl: 4 GPUs as 2x2", 4, false, s));
  EXPECT_FALSE(reshape_note("dl: 4 GPUs as 4x1 even", 4, false, s));
  EXPECT_FALSE(reshape_note("dl: 4 GPUs as 2x2 even (reshaped from 4x1) x", 4, false, s));
  // A comment claiming more GPUs than the job holds never grows it.
  EXPECT_FALSE(reshape_note("dl: 8 GPUs as 2x2 even", 8, false, s));
  Shape to;
  to.nodes_min = to.nodes_max = 4;
  to.gpus_per_node = 1;
  EXPECT_EQ(reshaped_comment("dl: 4 GPUs as 2x2 even, preemptible | PREEMPTED", 4, true, s, to),
            "dl: 4 GPUs as 4x1 even, preemptible (reshaped from 2x2) | PREEMPTED");
  EXPECT_EQ(reshaped_comment("dl: 4 GPUs as 2x2 even (reshaped from 4x1)", 4, false, s, to),
            "dl: 4 GPUs as 4x1 even (reshaped from 4x1)");
}

}  // namespace
}  // namespace dl
