#include "sched/sim/placement.h"

#include <algorithm>
#include <optional>

namespace dl::sim {
namespace {

// The run cons_tres takes next while `left` is missing; `size` is what the request
// counts in a run (its free GPUs or its nodes); a taken run has size 0.
template <class Size>
NodeRun& next_run(std::vector<NodeRun>& runs, std::uint64_t left, Size size) {
  std::size_t pick = runs.size();
  for (std::size_t k = 0; k < runs.size(); ++k) {
    if (size(runs[k]) == 0) continue;
    if (pick == runs.size()) {
      pick = k;
      continue;
    }
    const bool fits = size(runs[k]) >= left, pick_fits = size(runs[pick]) >= left;
    if (fits ? !pick_fits || runs[k].sum < runs[pick].sum
             : !pick_fits && runs[k].sum > runs[pick].sum) {
      pick = k;
    }
  }
  return runs[pick];
}

std::vector<Alloc> sorted_by_node(std::vector<Alloc> alloc) {
  std::sort(alloc.begin(), alloc.end(),
            [](const Alloc& x, const Alloc& y) { return x.node < y.node; });
  return alloc;
}

}  // namespace

std::vector<NodeRun> node_runs(const std::vector<std::uint32_t>& free, std::uint32_t min_free) {
  std::vector<NodeRun> runs;
  const std::size_t n = free.size();
  for (std::size_t i = 0; i < n;) {
    if (free[i] < min_free) {
      ++i;
      continue;
    }
    NodeRun r{i, i, 0, 0};
    while (i < n && free[i] >= min_free) {
      r.sum += free[i++];
      ++r.count;
    }
    r.end = i;
    runs.push_back(r);
  }
  return runs;
}

std::vector<Alloc> place_fifo(const std::vector<std::uint32_t>& free, std::uint32_t gpus) {
  auto runs = node_runs(free, 1);
  std::uint64_t total = 0;
  for (const auto& r : runs) total += r.sum;
  std::vector<Alloc> alloc;
  if (total < gpus) return alloc;
  std::uint32_t left = gpus;
  while (left > 0) {
    NodeRun& r = next_run(runs, left, [](const NodeRun& run) { return run.sum; });
    for (std::size_t k = r.start; k < r.end && left > 0; ++k) {
      const auto take = std::min(left, free[k]);
      alloc.push_back({static_cast<std::uint32_t>(k), take});
      left -= take;
    }
    r.sum = r.count = 0;
  }
  return sorted_by_node(std::move(alloc));
}

std::vector<Alloc> place_dl(const std::vector<std::uint32_t>& free, std::uint32_t nodes,
                            std::uint32_t per_node, const std::vector<std::uint32_t>& leaf_of,
                            std::uint32_t leaves) {
  std::vector<Alloc> alloc;
  const std::size_t n = free.size();
  if (nodes == 1) {
    std::size_t best = n;
    for (std::size_t k = 0; k < n; ++k) {
      if (free[k] >= per_node && (best == n || free[k] < free[best])) best = k;
    }
    if (best != n) alloc.push_back({static_cast<std::uint32_t>(best), per_node});
    return alloc;
  }
  std::optional<std::uint32_t> leaf;
  if (leaves > 1) {
    std::vector<std::uint32_t> fit(leaves, 0);
    for (std::size_t k = 0; k < n; ++k) fit[leaf_of[k]] += free[k] >= per_node;
    for (std::uint32_t l = 0; l < leaves; ++l) {
      if (fit[l] >= nodes && (!leaf || fit[l] < fit[*leaf])) leaf = l;
    }
  }
  std::vector<std::uint32_t> cand;
  for (std::size_t k = 0; k < n; ++k) {
    if (free[k] >= per_node && (!leaf || leaf_of[k] == *leaf)) {
      cand.push_back(static_cast<std::uint32_t>(k));
    }
  }
  if (cand.size() < nodes) return alloc;
  std::stable_sort(cand.begin(), cand.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return free[a] < free[b]; });
  cand.resize(nodes);
  std::sort(cand.begin(), cand.end());
  for (const auto k : cand) alloc.push_back({k, per_node});
  return alloc;
}

std::vector<Alloc> place_dl_cons_tres(const std::vector<std::uint32_t>& free, std::uint32_t nodes,
                                      std::uint32_t per_node) {
  auto runs = node_runs(free, per_node);
  std::uint64_t total = 0;
  for (const auto& r : runs) total += r.count;
  std::vector<Alloc> alloc;
  if (total < nodes) return alloc;
  std::uint32_t left = nodes;
  while (left > 0) {
    NodeRun& r = next_run(runs, left, [](const NodeRun& run) { return run.count; });
    for (std::size_t k = r.start; k < r.end && left > 0; ++k, --left) {
      alloc.push_back({static_cast<std::uint32_t>(k), per_node});
    }
    r.sum = r.count = 0;
  }
  return sorted_by_node(std::move(alloc));
}

}  // namespace dl::sim
