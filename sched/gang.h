// Gang shaping: how a DL gang of N GPUs becomes a native Slurm request (nodes x GPUs
// per node, exclusive, one leaf switch). One set of rules, used by the job_submit
// plugin at submit time and by dl-sim's `dl` policy.
//
//   pack    a gang that fits on one node stays on one node (1 x N, shared node);
//           a larger one takes ceil(N/G) whole nodes x G GPUs, exclusive. Never ragged:
//           every node of a multi-node gang holds the same number of GPUs.
//   spread  as many nodes as the partition has, the same number of GPUs on each:
//           g = ceil(N / nodes) GPUs per node on ceil(N / g) nodes.
//   switch  as pack, and a multi-node gang asks for one leaf switch (--switches=1).
//   even    even_split() below: a gang that fits one node stays on one node (shared);
//           a larger one is split evenly over shared nodes, no whole exclusive nodes
//           (12 on 8-GPU nodes: 2x6). Never ragged.
//   elastic MIN:MAX GPUs become a node range of whole nodes, ceil(MIN/G)-ceil(MAX/G)
//           x G, exclusive (capped at the nodes the partition has); a range whose
//           MAX fits one node is shaped as a pack gang of MAX GPUs.
//   -N n    a node count the user gave fixes the nodes: the gang is split evenly,
//           ceil(N/n) GPUs on each of the n nodes (under one switch for `switch`).
// G is the GPU count of the partition's largest node.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/spec.h"

namespace dl {

// What one partition offers a gang: the GPUs of each of its nodes and, with
// topology/tree, the nodes under each leaf switch (indexes into node_gpus).
struct Capacity {
  std::vector<std::uint32_t> node_gpus;
  std::vector<std::vector<std::uint32_t>> leaf_switches;

  std::uint32_t gpus_per_node() const;  // G: the largest node
  std::uint64_t total_gpus() const;
  // "4 nodes x 8 GPUs", or "5 nodes, 28 GPUs" when the nodes differ.
  std::string describe() const;
};

// The native form of a gang: nodes_min..nodes_max nodes with gpus_per_node GPUs each.
struct Shape {
  std::uint32_t nodes_min = 1;
  std::uint32_t nodes_max = 1;
  std::uint32_t gpus_per_node = 0;
  bool exclusive = false;   // whole nodes
  bool one_switch = false;  // all nodes under one leaf switch

  // "2x8", "1-2x8", "4x1"
  std::string layout() const;
  bool operator==(const Shape& o) const;
};

// The part of a spec that decides the shape.
struct Gang {
  std::uint32_t gpus = 0;
  Placement placement = Placement::pack;
  std::optional<Elastic> elastic;
  std::optional<std::uint32_t> nodes;  // -N given by the user

  // nullopt for a spec that asks for no GPUs.
  static std::optional<Gang> of(const Spec& spec);
};

// A gang that can never run in the partition. The message names the option, the
// shape, the partition and the largest gang of the same kind that could run there.
class ShapeError : public InputError {
 public:
  explicit ShapeError(const std::string& message) : InputError(message) {}
};

// The shape by the rules above, for a partition with `capacity`. Throws InputError
// for a combination the rules do not define (elastic with spread, more nodes than
// GPUs) and ShapeError for a partition without GPUs.
Shape shape_gang(const Gang& gang, const Capacity& capacity);

// A gang split evenly over shared nodes (no whole exclusive nodes): N <= G stays on
// one node (small gangs are never split); a larger gang takes the fewest nodes n,
// from ceil(N/G) to 2 x ceil(N/G), that divide N with N/n <= G (16 on 8-GPU nodes:
// 2x8, 12: 2x6, 9: 3x3); when none does (a prime such as 11), ceil(N/G) nodes with
// ceil(N / nodes) GPUs each (11: 2x6, one GPU held and unused). Never ragged.
Shape even_split(std::uint32_t gpus, std::uint32_t gpus_per_node);

// Every even split of a gang on at most `max_nodes` nodes, fewest nodes first:
// even_split() and then the other node counts n that divide N with N/n <= G (12 on
// 4-GPU nodes: 3x4, 4x3, 6x2, 12x1). A scheduler takes the first that fits now. Every
// split holds exactly N GPUs, except the lone even_split() of a gang that no node
// count from ceil(N/G) to 2 x ceil(N/G) divides (11 on 8-GPU nodes: 2x6 only). Empty
// when even_split() needs more than max_nodes.
std::vector<Shape> even_splits(std::uint32_t gpus, std::uint32_t gpus_per_node,
                               std::uint32_t max_nodes);

// Reshaping a pending even gang (PrioritySiteFactorParameters reshape=yes): what is free
// on each usable node now, and a pass over the pending jobs in priority order that starts
// each job where it fits, in another even split when its own does not (as dl-sim
// --shapes even-reshaped does).
struct FreeNode {
  std::uint32_t gpus = 0;
  std::uint32_t cpus = 0;
};

// Whether `shape` fits the free nodes now, each node giving `cpus_per_gpu` CPUs per GPU
// it gives (one task per GPU).
bool fits_now(const Shape& shape, const std::vector<FreeNode>& free, std::uint32_t cpus_per_gpu);

// Takes `shape` from the free nodes (best fit: the nodes with the fewest free GPUs that
// have enough), as a job that starts there would. The shape must fit (fits_now).
void take(const Shape& shape, std::vector<FreeNode>& free, std::uint32_t cpus_per_gpu);

// The even split a pending gang of `gpus` with shape `current` should take now: nullopt
// when `current` fits (or nothing else does), else the first split of even_splits() that
// fits. Only multi-node even gangs have other splits.
std::optional<Shape> other_split_that_fits(std::uint32_t gpus, std::uint32_t gpus_per_node,
                                           const Shape& current, const std::vector<FreeNode>& free,
                                           std::uint32_t cpus_per_gpu);

// The reshape decision of one pass, the same for site_factor/dl (reshape=yes) and dl-sim
// (--shapes even-reshaped): the caller hands it the waiting jobs in Slurm's order (the
// partition's PriorityTier, the job's priority, the older job first); each starts where
// it fits in its own shape, else in the first other even split that fits (a reshape),
// else it waits and takes nothing. The pass goes on past a job that waits, as Slurm's
// backfill scheduler does: a job behind it that a reshape lets fit now starts only where
// the backfill scheduler starts it, which delays no higher job.
class ReshapePass {
 public:
  struct Partition {
    std::vector<std::size_t> nodes;  // indices into `free`
    std::uint32_t gpus_per_node = 0;
  };
  struct Job {
    std::size_t partition = 0;  // index into the partitions
    Shape shape;                // its shape now
    std::uint32_t cpus_per_gpu = 1;
  };
  // `partitions`: those jobs wait in.
  ReshapePass(std::vector<FreeNode> free, std::vector<Partition> partitions);

  // The next job: the split it starts in when that is not its own shape, else nullopt
  // (it starts in its own, or cannot start). `reshapable_gpus` is asked only for a job
  // that does not fit in its own shape but whose GPUs its partition has free: its GPUs
  // when it may be reshaped (reshape_note), else nullopt.
  std::optional<Shape> next(const Job& job,
                            const std::function<std::optional<std::uint32_t>()>& reshapable_gpus);

 private:
  // What is free on a partition's nodes, taken again only after a job started: most jobs
  // the pass looks at start nowhere.
  struct View {
    std::vector<FreeNode> nodes;  // as Partition::nodes
    std::uint64_t free_gpus = 0;
    std::uint64_t taken = ~std::uint64_t{0};  // taken_ when made
  };
  std::vector<FreeNode> free_;
  std::vector<Partition> partitions_;
  std::vector<View> views_;
  std::uint64_t taken_ = 0;  // jobs started so far
};

// Whether a pending job may be reshaped: an even gang (placement even, not elastic) of
// `gpus` GPUs that its `shape` holds exactly, whose comment (up to " | ") is the one
// job_submit/dl wrote for that shape with one task per GPU and no -N, or that plus a
// " (reshaped from AxB)" note. Returns the note ("" before any reshape); nullopt when
// not. A reshape never changes the GPUs a job holds, whatever its comment claims.
std::optional<std::string> reshape_note(std::string_view comment, std::uint32_t gpus,
                                        bool preemptible, const Shape& shape);

// The comment of a job reshaped from `from` to `to` (keeping an earlier note and the
// status after " | ").
std::string reshaped_comment(std::string_view comment, std::uint32_t gpus, bool preemptible,
                             const Shape& from, const Shape& to);

// Whether the shape could run in the partition when it is empty (at its node minimum).
bool can_ever_run(const Shape& shape, const Capacity& capacity);

// The shape of the gang, checked against the partition and with the node maximum of
// an elastic range capped at what the partition has. Throws ShapeError when it can
// never run there.
Shape fit_gang(const Gang& gang, const Capacity& capacity, std::string_view partition);

// The summary the job comment starts with, e.g. "dl: 16 GPUs as 2x8, preemptible",
// "dl: 4 GPUs as 4x1 spread", "dl: 8-32 GPUs as 1-4x8, elastic".
// The ranks of a gang: one task per GPU (as torchrun's --nproc-per-node=gpu and
// Determined's slots do), unless the user laid the tasks out. A node range (elastic)
// gets neither (its steps choose); a gang of 3 on 2x2 whole nodes runs 3 ranks (2 + 1),
// so it has a total and no per_node.
struct Tasks {
  std::optional<std::uint32_t> per_node;  // unset when the GPUs do not fill every node
  std::optional<std::uint32_t> total;
};
Tasks one_task_per_gpu(const Gang& gang, const Shape& shape);

// The user's --ntasks-per-node on the gang's shape: sbatch derived its task count from
// the nodes asked at submission (`submitted_nodes`), before the shape changed them;
// a count the user gave (-n) differs from that and stands. nullopt: keep the job's.
std::optional<std::uint32_t> tasks_for_per_node(std::uint32_t per_node, std::uint32_t total,
                                                std::uint32_t submitted_nodes, const Shape& shape);

// A layout the user asked for (-n, --ntasks-per-node), as the comment shows it:
// "1 task per node", "3 tasks", "4 tasks, 2 per node"; "" when they asked for none.
std::string explicit_tasks(std::optional<std::uint32_t> total,
                           std::optional<std::uint32_t> per_node);

// "dl: 16 GPUs as 2x8, preemptible"; an explicit task layout follows the shape
// ("dl: 4 GPUs as 2x2, 1 task per node").
std::string describe(const Gang& gang, const Shape& shape, bool preemptible,
                     const std::string& tasks = "");

}  // namespace dl
