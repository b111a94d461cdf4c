#include "sched/gang.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <utility>

namespace dl {
namespace {

std::uint32_t ceil_div(std::uint64_t a, std::uint64_t b) {
  return static_cast<std::uint32_t>((a + b - 1) / b);
}

// Whole nodes of G GPUs for a gang of `gpus`; a gang that fits one node is shared.
Shape packed(std::uint64_t gpus, std::uint32_t per_node, bool one_switch) {
  Shape s;
  if (gpus <= per_node) {
    s.gpus_per_node = static_cast<std::uint32_t>(gpus);
    return s;
  }
  s.nodes_min = s.nodes_max = ceil_div(gpus, per_node);
  s.gpus_per_node = per_node;
  s.exclusive = true;
  s.one_switch = one_switch;
  return s;
}

// Nodes of the partition (or of one leaf) with at least `gpus` GPUs.
std::uint32_t nodes_with(const Capacity& c, const std::vector<std::uint32_t>* leaf,
                         std::uint32_t gpus) {
  std::uint32_t n = 0;
  if (leaf) {
    for (const auto i : *leaf) n += i < c.node_gpus.size() && c.node_gpus[i] >= gpus;
  } else {
    for (const auto g : c.node_gpus) n += g >= gpus;
  }
  return n;
}

// Most nodes with at least `gpus` GPUs that one placement may use: the whole
// partition, or the best leaf switch when the shape needs one.
std::uint32_t usable_nodes(const Capacity& c, std::uint32_t gpus, bool one_switch) {
  if (!one_switch) return nodes_with(c, nullptr, gpus);
  std::uint32_t best = 0;
  for (const auto& leaf : c.leaf_switches) best = std::max(best, nodes_with(c, &leaf, gpus));
  return best;
}

std::string option_of(const Gang& gang) {
  std::string o = gang.elastic
                      ? fmt::format("--dl-elastic={}:{}", gang.elastic->min, gang.elastic->max)
                      : fmt::format("--dl-gpus={}", gang.gpus);
  if (gang.nodes) o += fmt::format(" with -N {}", *gang.nodes);
  return o;
}

std::string kind_of(const Gang& gang) {
  if (gang.elastic) return "elastic";
  return std::string(to_string(gang.placement));
}

// The largest gang of the same kind that can run in the partition, as "16 GPUs (2x8)".
std::optional<std::string> largest_that_runs(const Gang& gang, const Capacity& c) {
  const std::uint64_t top = std::min<std::uint64_t>(c.total_gpus(), gang.gpus);
  for (std::uint64_t g = top; g >= 1; --g) {
    Gang smaller = gang;
    smaller.gpus = static_cast<std::uint32_t>(g);
    if (gang.nodes && *gang.nodes > g) continue;
    if (gang.elastic) {
      smaller.elastic = Elastic{std::min(gang.elastic->min, smaller.gpus), smaller.gpus};
    }
    const Shape s = shape_gang(smaller, c);
    if (can_ever_run(s, c)) return fmt::format("{} GPUs ({})", g, s.layout());
  }
  return std::nullopt;
}

}  // namespace

std::uint32_t Capacity::gpus_per_node() const {
  return node_gpus.empty() ? 0 : *std::max_element(node_gpus.begin(), node_gpus.end());
}

std::uint64_t Capacity::total_gpus() const {
  return std::accumulate(node_gpus.begin(), node_gpus.end(), std::uint64_t{0});
}

std::string Capacity::describe() const {
  const auto n = node_gpus.size();
  if (n > 0 && std::all_of(node_gpus.begin(), node_gpus.end(),
                           [&](std::uint32_t g) { return g == node_gpus.front(); })) {
    return fmt::format("{} node{} x {} GPUs", n, n == 1 ? "" : "s", node_gpus.front());
  }
  return fmt::format("{} node{}, {} GPUs", n, n == 1 ? "" : "s", total_gpus());
}

std::string Shape::layout() const {
  if (nodes_min == nodes_max) return fmt::format("{}x{}", nodes_min, gpus_per_node);
  return fmt::format("{}-{}x{}", nodes_min, nodes_max, gpus_per_node);
}

bool Shape::operator==(const Shape& o) const {
  return nodes_min == o.nodes_min && nodes_max == o.nodes_max && gpus_per_node == o.gpus_per_node &&
         exclusive == o.exclusive && one_switch == o.one_switch;
}

std::optional<Gang> Gang::of(const Spec& spec) {
  if (!spec.gpus) return std::nullopt;
  return Gang{*spec.gpus, spec.placement, spec.elastic, std::nullopt};
}

Shape shape_gang(const Gang& gang, const Capacity& c) {
  const std::uint32_t per_node = c.gpus_per_node();
  if (per_node == 0) {
    throw ShapeError(fmt::format("{}: the partition has no GPUs", option_of(gang)));
  }
  const bool one_switch = gang.placement == Placement::leaf_switch;
  if (gang.nodes) {
    const std::uint32_t n = *gang.nodes;
    if (n == 0 || n > gang.gpus) {
      throw InputError(fmt::format("{}: expected 1 to {} nodes, at least one GPU on each",
                                   option_of(gang), gang.gpus));
    }
    Shape s;
    s.nodes_min = s.nodes_max = n;
    s.gpus_per_node = ceil_div(gang.gpus, n);
    s.one_switch = one_switch && n > 1;
    return s;
  }
  if (gang.elastic) {
    if (gang.placement == Placement::spread || gang.placement == Placement::even) {
      throw InputError(
          fmt::format("--dl-elastic={}:{} with --dl-placement={}: an elastic gang grows by whole "
                      "nodes; use pack or switch",
                      gang.elastic->min, gang.elastic->max, to_string(gang.placement)));
    }
    if (gang.elastic->max <= per_node) return packed(gang.elastic->max, per_node, one_switch);
    Shape s;
    s.nodes_min = ceil_div(gang.elastic->min, per_node);
    s.nodes_max = ceil_div(gang.elastic->max, per_node);
    s.gpus_per_node = per_node;
    s.exclusive = true;
    s.one_switch = one_switch;
    return s;
  }
  if (gang.placement == Placement::even) return even_split(gang.gpus, per_node);
  if (gang.placement == Placement::spread) {
    const auto nodes = std::max<std::uint32_t>(nodes_with(c, nullptr, 1), 1);
    Shape s;
    s.gpus_per_node = ceil_div(gang.gpus, nodes);
    s.nodes_min = s.nodes_max = ceil_div(gang.gpus, s.gpus_per_node);
    return s;
  }
  return packed(gang.gpus, per_node, one_switch);
}

bool can_ever_run(const Shape& shape, const Capacity& c) {
  if (shape.gpus_per_node == 0) return true;
  return usable_nodes(c, shape.gpus_per_node, shape.one_switch) >= shape.nodes_min;
}

Shape fit_gang(const Gang& gang, const Capacity& c, std::string_view partition) {
  Shape s = shape_gang(gang, c);
  if (can_ever_run(s, c)) {
    s.nodes_max = std::min(s.nodes_max, usable_nodes(c, s.gpus_per_node, s.one_switch));
    return s;
  }
  std::string where = fmt::format("partition {} ({})", partition, c.describe());
  if (s.one_switch) {
    where += c.leaf_switches.empty() ? ", which has no leaf switches (TopologyPlugin=topology/tree)"
                                     : fmt::format(", at most {} such nodes under one leaf switch",
                                                   usable_nodes(c, s.gpus_per_node, true));
  }
  const auto largest = largest_that_runs(gang, c);
  const std::string kind = kind_of(gang);
  throw ShapeError(fmt::format("{}: {} {} gang of {}{} can never run in {}; {}", option_of(gang),
                               kind.front() == 'e' ? "an" : "a", kind, s.layout(),
                               s.exclusive ? " whole nodes" : " GPUs", where,
                               largest
                                   ? fmt::format("the largest {} gang there is {}", kind, *largest)
                                   : std::string("no gang of that kind can run there")));
}

Tasks one_task_per_gpu(const Gang& gang, const Shape& shape) {
  Tasks t;
  const std::uint32_t per_node = std::max<std::uint32_t>(shape.gpus_per_node, 1);
  // A node range gets no task count: a requeued job keeps the count of its first run,
  // which would then pin it to that many nodes. Its steps lay the tasks out (srun
  // --ntasks-per-node).
  if (gang.elastic || shape.nodes_min != shape.nodes_max) return t;
  t.total = std::min(std::max<std::uint32_t>(gang.gpus, 1), per_node * shape.nodes_min);
  // On one node the total says it all; a per-node count there kept slurmctld from
  // preempting for the job (sched.bats, "within a tier").
  if (shape.nodes_min > 1 && *t.total == per_node * shape.nodes_min) t.per_node = per_node;
  return t;
}

std::optional<std::uint32_t> tasks_for_per_node(std::uint32_t per_node, std::uint32_t total,
                                                std::uint32_t submitted_nodes, const Shape& shape) {
  if (total != per_node * std::max<std::uint32_t>(submitted_nodes, 1)) return std::nullopt;
  if (shape.nodes_min != shape.nodes_max) return std::nullopt;
  return per_node * shape.nodes_min;
}

std::string explicit_tasks(std::optional<std::uint32_t> total,
                           std::optional<std::uint32_t> per_node) {
  const auto plural = [](std::uint32_t n) { return n == 1 ? "task" : "tasks"; };
  if (total && per_node)
    return fmt::format("{} {}, {} per node", *total, plural(*total), *per_node);
  if (total) return fmt::format("{} {}", *total, plural(*total));
  if (per_node) return fmt::format("{} {} per node", *per_node, plural(*per_node));
  return "";
}

std::string describe(const Gang& gang, const Shape& shape, bool preemptible,
                     const std::string& tasks) {
  std::string gpus = gang.elastic ? fmt::format("{}-{}", gang.elastic->min, gang.elastic->max)
                                  : std::to_string(gang.gpus);
  std::string out = fmt::format("dl: {} GPUs as {}", gpus, shape.layout());
  if (gang.placement == Placement::spread) out += " spread";
  if (gang.placement == Placement::even) {
    out += " even";
    // The nodes the user asked for (-N): site_factor/dl's reshape=yes leaves the job alone.
    if (gang.nodes) out += fmt::format(" (-N {})", *gang.nodes);
  }
  if (shape.one_switch) out += " on one switch";
  if (!tasks.empty()) out += ", " + tasks;
  if (gang.elastic) out += ", elastic";
  if (preemptible) out += ", preemptible";
  return out;
}

Shape even_split(std::uint32_t gpus, std::uint32_t gpus_per_node) {
  if (gpus_per_node == 0) throw InputError("even_split: a node has no GPUs");
  Shape s;
  if (gpus <= gpus_per_node) {
    s.gpus_per_node = gpus;
    return s;
  }
  const std::uint32_t fewest = (gpus + gpus_per_node - 1) / gpus_per_node;
  std::uint32_t nodes = fewest;
  for (std::uint32_t n = fewest; n <= 2 * fewest && n <= gpus; ++n) {
    if (gpus % n == 0 && gpus / n <= gpus_per_node) {
      nodes = n;
      break;
    }
  }
  s.nodes_min = s.nodes_max = nodes;
  s.gpus_per_node = (gpus + nodes - 1) / nodes;
  return s;
}

std::vector<Shape> even_splits(std::uint32_t gpus, std::uint32_t gpus_per_node,
                               std::uint32_t max_nodes) {
  std::vector<Shape> shapes{even_split(gpus, gpus_per_node)};
  if (shapes[0].nodes_min > max_nodes) return {};
  // A small gang stays on one node; a gang no node count divides holds one split.
  if (gpus <= gpus_per_node || shapes[0].nodes_min * shapes[0].gpus_per_node != gpus) {
    return shapes;
  }
  for (std::uint32_t n = shapes[0].nodes_min + 1; n <= std::min(gpus, max_nodes); ++n) {
    if (gpus % n != 0 || gpus / n > gpus_per_node) continue;
    Shape s;
    s.nodes_min = s.nodes_max = n;
    s.gpus_per_node = gpus / n;
    shapes.push_back(s);
  }
  return shapes;
}

namespace {
constexpr std::string_view kReshaped = " (reshaped from ";

std::string even_comment(std::uint32_t gpus, bool preemptible, const Shape& shape) {
  return describe(Gang{gpus, Placement::even, std::nullopt, std::nullopt}, shape, preemptible, "");
}
}  // namespace

std::optional<std::string> reshape_note(std::string_view comment, std::uint32_t gpus,
                                        bool preemptible, const Shape& shape) {
  if (shape.nodes_min < 2 || shape.nodes_min != shape.nodes_max || shape.exclusive ||
      shape.one_switch || shape.nodes_min * shape.gpus_per_node != gpus) {
    return std::nullopt;
  }
  const std::string_view head = comment.substr(0, comment.find(" | "));
  const std::string base = even_comment(gpus, preemptible, shape);
  if (head.substr(0, base.size()) != base) return std::nullopt;
  const std::string_view note = head.substr(base.size());
  if (note.empty()) return std::string();
  if (note.substr(0, kReshaped.size()) != kReshaped || note.back() != ')' ||
      note.find(')') != note.size() - 1) {
    return std::nullopt;
  }
  return std::string(note);
}

std::string reshaped_comment(std::string_view comment, std::uint32_t gpus, bool preemptible,
                             const Shape& from, const Shape& to) {
  const auto note = reshape_note(comment, gpus, preemptible, from);
  const auto bar = comment.find(" | ");
  return even_comment(gpus, preemptible, to) +
         (note && !note->empty() ? *note : fmt::format("{}{})", kReshaped, from.layout())) +
         std::string(bar == std::string_view::npos ? std::string_view() : comment.substr(bar));
}

bool fits_now(const Shape& shape, const std::vector<FreeNode>& free, std::uint32_t cpus_per_gpu) {
  std::uint32_t nodes = 0;
  for (const auto& n : free) {
    if (n.gpus >= shape.gpus_per_node &&
        std::uint64_t{n.cpus} >= std::uint64_t{shape.gpus_per_node} * cpus_per_gpu) {
      if (++nodes >= shape.nodes_min) return true;
    }
  }
  return false;
}

void take(const Shape& shape, std::vector<FreeNode>& free, std::uint32_t cpus_per_gpu) {
  const std::uint64_t cpus = std::uint64_t{shape.gpus_per_node} * cpus_per_gpu;
  std::vector<std::size_t> usable;
  for (std::size_t i = 0; i < free.size(); ++i) {
    if (free[i].gpus >= shape.gpus_per_node && free[i].cpus >= cpus) usable.push_back(i);
  }
  std::stable_sort(usable.begin(), usable.end(),
                   [&](std::size_t a, std::size_t b) { return free[a].gpus < free[b].gpus; });
  for (std::size_t k = 0; k < usable.size() && k < shape.nodes_min; ++k) {
    free[usable[k]].gpus -= shape.gpus_per_node;
    free[usable[k]].cpus -= static_cast<std::uint32_t>(cpus);
  }
}

std::optional<Shape> other_split_that_fits(std::uint32_t gpus, std::uint32_t gpus_per_node,
                                           const Shape& current, const std::vector<FreeNode>& free,
                                           std::uint32_t cpus_per_gpu) {
  if (fits_now(current, free, cpus_per_gpu)) return std::nullopt;
  const auto max_nodes = static_cast<std::uint32_t>(free.size());
  for (const Shape& s : even_splits(gpus, gpus_per_node, std::max(max_nodes, 1u))) {
    if (s.nodes_min * s.gpus_per_node != gpus) continue;  // the lone inexact split
    if (s == current) continue;
    if (fits_now(s, free, cpus_per_gpu)) return s;
  }
  return std::nullopt;
}

ReshapePass::ReshapePass(std::vector<FreeNode> free, std::vector<Partition> partitions)
    : free_(std::move(free)), partitions_(std::move(partitions)), views_(partitions_.size()) {}

std::optional<Shape> ReshapePass::next(
    const Job& job, const std::function<std::optional<std::uint32_t>()>& reshapable_gpus) {
  if (job.partition >= partitions_.size()) return std::nullopt;
  const Partition& part = partitions_[job.partition];
  View& view = views_[job.partition];
  if (view.taken != taken_) {
    view.nodes.clear();
    view.free_gpus = 0;
    for (const auto n : part.nodes) {
      view.nodes.push_back(free_[n]);
      view.free_gpus += free_[n].gpus;
    }
    view.taken = taken_;
  }
  // Every split of a gang holds the same GPUs: none fits when the partition has fewer
  // free (the usual case in a full cluster, answered without looking at the nodes or
  // asking about the job).
  const std::uint64_t holds = std::uint64_t{job.shape.nodes_min} * job.shape.gpus_per_node;
  if (holds > view.free_gpus) return std::nullopt;
  Shape start = job.shape;
  std::optional<Shape> reshaped;
  if (!fits_now(job.shape, view.nodes, job.cpus_per_gpu)) {
    const auto gpus = reshapable_gpus();
    if (gpus) {
      reshaped =
          other_split_that_fits(*gpus, part.gpus_per_node, job.shape, view.nodes, job.cpus_per_gpu);
    }
    if (!reshaped) return std::nullopt;
    start = *reshaped;
  }
  take(start, view.nodes, job.cpus_per_gpu);
  for (std::size_t i = 0; i < part.nodes.size(); ++i) free_[part.nodes[i]] = view.nodes[i];
  // The other partitions' views are stale now (they may share these nodes); this one is
  // current.
  view.taken = ++taken_;
  view.free_gpus -= std::uint64_t{start.nodes_min} * start.gpus_per_node;
  return reshaped;
}

}  // namespace dl
