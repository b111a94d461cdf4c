// dl-sim's placements: where a job's GPUs go on the free GPUs of the nodes now. Pure
// functions of the free-GPU vector (free[k]: free GPUs of node k), unit-tested alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dl::sim {

struct Alloc {
  std::uint32_t node;
  std::uint32_t gpus;
};

// select/cons_tres' choice of nodes (its _eval_nodes): the runs of consecutive nodes
// with at least `min_free` free GPUs are the candidate sets; while the request is not
// met it takes the set that holds what is missing with the fewest free GPUs, or else the
// largest one (the first of equals), nodes from the set in order.
struct NodeRun {
  std::size_t start, end;
  std::uint64_t sum;    // free GPUs
  std::uint32_t count;  // nodes
};

// The runs of consecutive nodes with at least `min_free` free GPUs, in node order.
std::vector<NodeRun> node_runs(const std::vector<std::uint32_t>& free, std::uint32_t min_free);

// --gpus=N as select/cons_tres places it: GPUs from the nodes of the runs it takes. A
// gang may span several runs: only --contiguous asks for one. Empty when it does not fit.
std::vector<Alloc> place_fifo(const std::vector<std::uint32_t>& free, std::uint32_t gpus);

// A dl shape: one node with the fewest free GPUs that suffice (best fit, so large
// holes stay whole), or `nodes` nodes with `per_node` free GPUs each, those with the
// fewest free GPUs first (whole nodes for a whole-node shape), under one leaf switch
// when one has enough (the leaf with the fewest such nodes that suffice). leaf_of[k]:
// node k's leaf switch, of `leaves` (0 or 1: no switches). Empty when it does not fit.
std::vector<Alloc> place_dl(const std::vector<std::uint32_t>& free, std::uint32_t nodes,
                            std::uint32_t per_node, const std::vector<std::uint32_t>& leaf_of,
                            std::uint32_t leaves);

// A dl shape as select/cons_tres places it when the job asks for `per_node` GPUs on each
// of `nodes` nodes: the runs are of nodes with that many free GPUs, and the run taken is
// the one with enough of them and the fewest free GPUs, or else the largest. Not best
// fit: a one-node job may take a node with more free GPUs than another run's single
// node, if its run has fewer free GPUs in all. Empty when it does not fit.
std::vector<Alloc> place_dl_cons_tres(const std::vector<std::uint32_t>& free, std::uint32_t nodes,
                                      std::uint32_t per_node);

}  // namespace dl::sim
