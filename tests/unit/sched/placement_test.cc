#include "sched/sim/placement.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace dl::sim {
namespace {

using Free = std::vector<std::uint32_t>;
using Want = std::vector<std::pair<std::uint32_t, std::uint32_t>>;  // (node, GPUs)

Want pairs(const std::vector<Alloc>& alloc) {
  Want out;
  for (const auto& a : alloc) out.emplace_back(a.node, a.gpus);
  return out;
}

TEST(Placement, NodeRunsAreTheStretchesOfNodesWithEnoughFreeGpus) {
  struct Case {
    Free free;
    std::uint32_t min_free;
    std::vector<std::vector<std::size_t>> want;  // start, end, sum, count
  };
  const Case cases[] = {
      {{0, 2, 3, 0, 1}, 1, {{1, 3, 5, 2}, {4, 5, 1, 1}}},
      {{0, 2, 3, 0, 1}, 2, {{1, 3, 5, 2}}},
      {{0, 2, 3, 0, 1}, 3, {{2, 3, 3, 1}}},
      {{4, 4, 4}, 4, {{0, 3, 12, 3}}},
      {{0, 0}, 1, {}},
  };
  for (const auto& c : cases) {
    std::vector<std::vector<std::size_t>> got;
    for (const auto& r : node_runs(c.free, c.min_free))
      got.push_back({r.start, r.end, r.sum, r.count});
    EXPECT_EQ(got, c.want) << "min_free " << c.min_free;
  }
}

TEST(Placement, ConsTresTakesTheFittingRunWithTheFewestFreeGpusElseTheLargest) {
  struct Case {
    const char* what;
    Free free;
    std::uint32_t nodes, per_node;
    Want want;
  };
  const Case cases[] = {
      {"the first nodes of the only run", {4, 4, 4, 4}, 2, 4, {{0, 4}, {1, 4}}},
      {"the run's first node, not the best fit", {0, 0, 4, 2}, 1, 2, {{2, 2}}},
      {"the run with fewer free GPUs", {2, 0, 4, 2}, 1, 2, {{0, 2}}},
      {"the smallest run that holds the nodes", {4, 0, 4, 4, 0, 4, 4, 4}, 2, 4, {{2, 4}, {3, 4}}},
      {"fewest free GPUs among runs of as many nodes", {4, 4, 1, 2, 2}, 2, 2, {{3, 2}, {4, 2}}},
      {"the largest run, then the fitting run with the fewest",
       {4, 0, 4, 4, 0, 4, 4, 4, 0, 4},
       4,
       4,
       {{0, 4}, {5, 4}, {6, 4}, {7, 4}}},
      {"per_node GPUs on nodes with more free", {3, 1, 2, 3}, 2, 2, {{2, 2}, {3, 2}}},
      {"too few nodes with per_node free", {4, 3, 4}, 3, 4, {}},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(pairs(place_dl_cons_tres(c.free, c.nodes, c.per_node)), c.want) << c.what;
  }
}

TEST(Placement, FifoTakesGpusFromTheRunsConsTresPicks) {
  struct Case {
    const char* what;
    Free free;
    std::uint32_t gpus;
    Want want;
  };
  const Case cases[] = {
      {"from the first node of the run", {4, 4}, 3, {{0, 3}}},
      {"over the nodes of one run", {2, 3, 1}, 4, {{0, 2}, {1, 2}}},
      {"the fitting run with the fewest free GPUs", {1, 0, 3, 2, 0, 2}, 2, {{5, 2}}},
      {"the largest run first, then the first of equals",
       {1, 0, 1, 1, 0, 1},
       4,
       {{0, 1}, {2, 1}, {3, 1}, {5, 1}}},
      {"too few free GPUs", {1, 2}, 4, {}},
  };
  for (const auto& c : cases) EXPECT_EQ(pairs(place_fifo(c.free, c.gpus)), c.want) << c.what;
}

TEST(Placement, DlTakesTheBestFitUnderOneLeafSwitchWhenOneHasEnough) {
  struct Case {
    const char* what;
    Free free;
    std::uint32_t nodes, per_node;
    std::vector<std::uint32_t> leaf_of;
    std::uint32_t leaves;
    Want want;
  };
  const Case cases[] = {
      {"one node: the fewest free that suffice", {4, 2, 3, 2}, 1, 2, {0, 0, 0, 0}, 0, {{1, 2}}},
      {"one node: none fits", {1, 1}, 1, 2, {0, 0}, 0, {}},
      {"nodes with the fewest free first", {4, 3, 4, 3}, 2, 3, {0, 0, 0, 0}, 0, {{1, 3}, {3, 3}}},
      {"the leaf with the fewest nodes that suffice",
       {4, 4, 4, 4, 0, 4},
       2,
       4,
       {0, 0, 0, 1, 1, 1},
       2,
       {{3, 4}, {5, 4}}},
      {"no switches: the first nodes",
       {4, 4, 4, 4, 0, 4},
       2,
       4,
       {0, 0, 0, 0, 0, 0},
       0,
       {{0, 4}, {1, 4}}},
      {"no leaf has enough: any nodes", {4, 0, 4, 0}, 2, 4, {0, 0, 1, 1}, 2, {{0, 4}, {2, 4}}},
      {"too few nodes", {4, 0, 4, 0}, 3, 4, {0, 0, 0, 0}, 0, {}},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(pairs(place_dl(c.free, c.nodes, c.per_node, c.leaf_of, c.leaves)), c.want) << c.what;
  }
}

}  // namespace
}  // namespace dl::sim
