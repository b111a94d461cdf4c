// Resharding arithmetic: which parts of which saved pieces a reader needs to fill a box
// of a tensor, whatever world size wrote it and whatever world size reads it.
#pragma once

#include <dl/ckpt_types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dl::ckpt {

// Why `boxes` do not tile `shape` exactly, or "" if they do. Identical boxes are
// replicas (every data-parallel rank saving the same tensor) and count once; distinct
// boxes must be disjoint and together cover every element.
std::string tiling_problem(const Shape& shape, const std::vector<Slice>& boxes);

// A contiguous run of elements to copy: from a piece's buffer (row-major in the piece's
// shape) to the destination buffer (row-major in the requested box's shape).
struct CopyRun {
  std::uint64_t src = 0;    // element index in the piece
  std::uint64_t dst = 0;    // element index in the destination
  std::uint64_t count = 0;  // elements
};

struct PiecePlan {
  std::size_t piece = 0;  // index into the boxes given to plan_read
  std::vector<CopyRun> runs;
};

// The copies that fill `want` (a box of `shape`) from the saved `boxes`, which must
// tile the shape. Of identical boxes the first is used. Pieces that do not overlap
// `want` are left out. Throws std::invalid_argument if `want` is not inside `shape`.
std::vector<PiecePlan> plan_read(const Shape& shape, const std::vector<Slice>& boxes,
                                 const Slice& want);

}  // namespace dl::ckpt
