#include "ckpt/reshard.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace dl::ckpt {
namespace {

std::string box_str(const Slice& b) {
  return fmt::format("[{}]+[{}]", fmt::join(b.offset, ","), fmt::join(b.shape, ","));
}

// Volume, saturating: a box larger than 2^64 elements cannot be valid anyway.
std::uint64_t volume(const Shape& s) {
  std::uint64_t n = 1;
  for (std::uint64_t d : s) {
    if (d == 0) return 0;
    n = n > UINT64_MAX / d ? UINT64_MAX : n * d;
  }
  return n;
}

bool intersect(const Slice& a, const Slice& b, Slice* out) {
  Slice r;
  for (std::size_t d = 0; d < a.shape.size(); ++d) {
    const std::uint64_t lo = std::max(a.offset[d], b.offset[d]);
    const std::uint64_t hi = std::min(a.offset[d] + a.shape[d], b.offset[d] + b.shape[d]);
    if (hi <= lo) return false;
    r.offset.push_back(lo);
    r.shape.push_back(hi - lo);
  }
  if (out) *out = std::move(r);
  return true;
}

bool same_box(const Slice& a, const Slice& b) { return a.offset == b.offset && a.shape == b.shape; }

// The one dimension along which the boxes differ from the full shape, if all of them
// span every other dimension completely (the usual row or column split).
int split_dim(const Shape& shape, const std::vector<const Slice*>& boxes) {
  int dim = -1;
  for (const Slice* b : boxes) {
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (b->offset[d] == 0 && b->shape[d] == shape[d]) continue;
      if (dim != -1 && dim != static_cast<int>(d)) return -2;
      dim = static_cast<int>(d);
    }
  }
  return dim;
}

}  // namespace

Slice even_split(const Shape& global_shape, std::size_t dim, unsigned rank, unsigned world) {
  if (dim >= global_shape.size()) {
    throw std::invalid_argument(fmt::format("even_split: dimension {} of a {}-dimensional tensor",
                                            dim, global_shape.size()));
  }
  if (world == 0 || rank >= world) {
    throw std::invalid_argument(fmt::format("even_split: rank {} of world size {}", rank, world));
  }
  const std::uint64_t n = global_shape[dim];
  const std::uint64_t base = n / world;
  const std::uint64_t extra = n % world;
  Slice s{Shape(global_shape.size(), 0), global_shape};
  s.offset[dim] = rank * base + std::min<std::uint64_t>(rank, extra);
  s.shape[dim] = base + (rank < extra ? 1 : 0);
  return s;
}

std::string tiling_problem(const Shape& shape, const std::vector<Slice>& boxes) {
  std::vector<const Slice*> distinct;
  for (const Slice& b : boxes) {
    if (b.offset.size() != shape.size() || b.shape.size() != shape.size()) {
      return fmt::format("box {} does not have {} dimensions", box_str(b), shape.size());
    }
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (b.offset[d] > shape[d] || b.shape[d] > shape[d] - b.offset[d]) {
        return fmt::format("box {} exceeds the shape", box_str(b));
      }
    }
    if (volume(b.shape) == 0) continue;
    bool replica = false;
    for (const Slice* seen : distinct) replica = replica || same_box(*seen, b);
    if (!replica) distinct.push_back(&b);
  }

  const int dim = split_dim(shape, distinct);
  if (dim >= 0) {
    // Intervals along one dimension: sort, then check they touch end to start.
    std::vector<const Slice*> sorted = distinct;
    std::sort(sorted.begin(), sorted.end(),
              [dim](const Slice* a, const Slice* b) { return a->offset[dim] < b->offset[dim]; });
    std::uint64_t pos = 0;
    for (const Slice* b : sorted) {
      if (b->offset[dim] < pos) return fmt::format("pieces overlap at {}", box_str(*b));
      if (b->offset[dim] > pos) {
        return fmt::format("elements {} to {} of dimension {} are in no piece", pos,
                           b->offset[dim] - 1, dim);
      }
      pos = b->offset[dim] + b->shape[dim];
    }
    if (pos != shape[dim]) {
      return fmt::format("elements from {} of dimension {} are in no piece", pos, dim);
    }
    return "";
  }

  // General boxes: pairwise disjoint and the volumes add up to the whole.
  std::uint64_t covered = 0;
  for (std::size_t i = 0; i < distinct.size(); ++i) {
    for (std::size_t j = i + 1; j < distinct.size(); ++j) {
      if (intersect(*distinct[i], *distinct[j], nullptr)) {
        return fmt::format("pieces {} and {} overlap", box_str(*distinct[i]),
                           box_str(*distinct[j]));
      }
    }
    covered += volume(distinct[i]->shape);
  }
  if (covered != volume(shape)) {
    return fmt::format("the pieces cover {} of {} elements", covered, volume(shape));
  }
  return "";
}

std::vector<PiecePlan> plan_read(const Shape& shape, const std::vector<Slice>& boxes,
                                 const Slice& want) {
  const std::size_t rank = shape.size();
  if (want.offset.size() != rank || want.shape.size() != rank) {
    throw std::invalid_argument(
        fmt::format("box {} does not have {} dimensions", box_str(want), rank));
  }
  for (std::size_t d = 0; d < rank; ++d) {
    if (want.offset[d] > shape[d] || want.shape[d] > shape[d] - want.offset[d]) {
      throw std::invalid_argument(
          fmt::format("box {} is not inside the shape [{}]", box_str(want), fmt::join(shape, ",")));
    }
  }
  std::vector<PiecePlan> plans;
  if (volume(want.shape) == 0) return plans;
  std::vector<const Slice*> used;
  for (std::size_t i = 0; i < boxes.size(); ++i) {
    const Slice& box = boxes[i];
    bool replica = false;
    for (const Slice* u : used) replica = replica || same_box(*u, box);
    if (replica || volume(box.shape) == 0) continue;
    used.push_back(&box);
    Slice cut;
    if (rank > 0 && !intersect(box, want, &cut)) continue;
    PiecePlan plan{i, {}};
    if (rank == 0) {
      plan.runs.push_back({0, 0, 1});
      plans.push_back(std::move(plan));
      continue;
    }
    // The trailing dimensions that the cut spans fully in both the piece and the
    // destination form one contiguous block; iterate over the leading ones only.
    std::size_t k = rank - 1;
    while (k > 0 && cut.shape[k] == box.shape[k] && cut.shape[k] == want.shape[k]) --k;
    std::uint64_t block = 1;
    for (std::size_t d = k; d < rank; ++d) block *= cut.shape[d];
    Shape src_stride(rank, 1);
    Shape dst_stride(rank, 1);
    for (std::size_t d = rank - 1; d > 0; --d) {
      src_stride[d - 1] = src_stride[d] * box.shape[d];
      dst_stride[d - 1] = dst_stride[d] * want.shape[d];
    }
    Shape index(k, 0);  // an odometer over dimensions [0, k)
    bool done = false;
    while (!done) {
      std::uint64_t src = 0;
      std::uint64_t dst = 0;
      for (std::size_t d = 0; d < rank; ++d) {
        const std::uint64_t i_d = d < k ? index[d] : 0;
        src += (cut.offset[d] - box.offset[d] + i_d) * src_stride[d];
        dst += (cut.offset[d] - want.offset[d] + i_d) * dst_stride[d];
      }
      plan.runs.push_back({src, dst, block});
      done = true;
      for (std::size_t d = k; d > 0 && done; --d) {
        if (++index[d - 1] < cut.shape[d - 1]) {
          done = false;
        } else {
          index[d - 1] = 0;
        }
      }
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

}  // namespace dl::ckpt
