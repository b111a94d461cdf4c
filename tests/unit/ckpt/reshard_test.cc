#include "ckpt/reshard.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

namespace dl::ckpt {
namespace {

std::vector<Slice> split(const Shape& shape, std::size_t dim, unsigned world) {
  std::vector<Slice> out;
  for (unsigned r = 0; r < world; ++r) out.push_back(even_split(shape, dim, r, world));
  return out;
}

std::uint64_t count(const Shape& s) {
  return std::accumulate(s.begin(), s.end(), std::uint64_t{1}, std::multiplies<>());
}

// The value of the global element at `index` is its row-major position.
std::uint64_t linear(const Shape& shape, const Shape& index) {
  std::uint64_t v = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) v = v * shape[d] + index[d];
  return v;
}

// The contents of `box`: each element's global row-major position.
std::vector<std::uint64_t> contents(const Shape& shape, const Slice& box) {
  std::vector<std::uint64_t> out;
  Shape index(shape.size(), 0);
  const std::uint64_t n = count(box.shape);
  for (std::uint64_t i = 0; i < n; ++i) {
    std::uint64_t rest = i;
    for (std::size_t d = shape.size(); d-- > 0;) {
      index[d] = box.offset[d] + rest % box.shape[d];
      rest /= box.shape[d];
    }
    out.push_back(linear(shape, index));
  }
  return out;
}

// Fills `want` from the saved boxes by following the plan.
std::vector<std::uint64_t> assemble(const Shape& shape, const std::vector<Slice>& boxes,
                                    const Slice& want) {
  std::vector<std::uint64_t> out(count(want.shape), UINT64_MAX);
  for (const PiecePlan& plan : plan_read(shape, boxes, want)) {
    const std::vector<std::uint64_t> piece = contents(shape, boxes[plan.piece]);
    for (const CopyRun& run : plan.runs) {
      for (std::uint64_t k = 0; k < run.count; ++k) out.at(run.dst + k) = piece.at(run.src + k);
    }
  }
  return out;
}

TEST(CkptReshard, EvenSplitIsNumpyArraySplit) {
  const Shape shape{10, 3};
  const std::uint64_t expect_offset[] = {0, 3, 6, 8};
  const std::uint64_t expect_rows[] = {3, 3, 2, 2};
  for (unsigned r = 0; r < 4; ++r) {
    const Slice s = even_split(shape, 0, r, 4);
    EXPECT_EQ(s.offset, (Shape{expect_offset[r], 0}));
    EXPECT_EQ(s.shape, (Shape{expect_rows[r], 3}));
  }
  EXPECT_EQ(even_split({2, 5}, 0, 3, 4).shape, (Shape{0, 5}));
  EXPECT_THROW(even_split({2}, 1, 0, 1), std::invalid_argument);
  EXPECT_THROW(even_split({2}, 0, 2, 2), std::invalid_argument);
}

TEST(CkptReshard, TilingAcceptsExactCoversAndReplicas) {
  EXPECT_EQ(tiling_problem({10, 3}, split({10, 3}, 0, 4)), "");
  EXPECT_EQ(tiling_problem({10, 3}, split({10, 3}, 1, 2)), "");
  EXPECT_EQ(tiling_problem({4, 4}, {{{0, 0}, {4, 4}}, {{0, 0}, {4, 4}}}), "");  // replicas
  EXPECT_EQ(tiling_problem({}, {{{}, {}}, {{}, {}}}), "");                      // scalar replicas
  EXPECT_EQ(tiling_problem(
                {4, 4}, {{{0, 0}, {2, 2}}, {{0, 2}, {2, 2}}, {{2, 0}, {2, 2}}, {{2, 2}, {2, 2}}}),
            "");
  EXPECT_EQ(tiling_problem({0, 4}, {{{0, 0}, {0, 4}}}), "");
}

TEST(CkptReshard, TilingNamesGapsAndOverlaps) {
  EXPECT_EQ(tiling_problem({10}, {{{0}, {4}}, {{5}, {5}}}),
            "elements 4 to 4 of dimension 0 are in no piece");
  EXPECT_EQ(tiling_problem({10}, {{{0}, {6}}, {{5}, {5}}}), "pieces overlap at [5]+[5]");
  EXPECT_EQ(tiling_problem({10}, {{{0}, {6}}}), "elements from 6 of dimension 0 are in no piece");
  EXPECT_EQ(tiling_problem(
                {4, 4}, {{{0, 0}, {2, 2}}, {{0, 2}, {2, 2}}, {{2, 0}, {2, 4}}, {{1, 1}, {1, 1}}}),
            "pieces [0,0]+[2,2] and [1,1]+[1,1] overlap");
  EXPECT_EQ(tiling_problem({4, 4}, {{{0, 0}, {2, 2}}, {{2, 2}, {2, 2}}}),
            "the pieces cover 8 of 16 elements");
  EXPECT_EQ(tiling_problem({4}, {{{0}, {5}}}), "box [0]+[5] exceeds the shape");
  EXPECT_EQ(tiling_problem({4}, {{{0, 0}, {4, 1}}}), "box [0,0]+[4,1] does not have 1 dimensions");
}

TEST(CkptReshard, RowSplitsReadAsOneRunPerPiece) {
  // Written by 4 ranks, read by rank 1 of 3.
  const Shape shape{10, 3};
  const auto boxes = split(shape, 0, 4);
  const Slice want = even_split(shape, 0, 1, 3);  // rows 4..6
  const auto plans = plan_read(shape, boxes, want);
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(plans[0].piece, 1u);  // rows 3..5
  ASSERT_EQ(plans[0].runs.size(), 1u);
  EXPECT_EQ(plans[0].runs[0].src, 3u);
  EXPECT_EQ(plans[0].runs[0].dst, 0u);
  EXPECT_EQ(plans[0].runs[0].count, 6u);
  EXPECT_EQ(plans[1].piece, 2u);  // rows 6..7
  EXPECT_EQ(plans[1].runs[0].src, 0u);
  EXPECT_EQ(plans[1].runs[0].dst, 6u);
  EXPECT_EQ(plans[1].runs[0].count, 3u);
  EXPECT_EQ(assemble(shape, boxes, want), contents(shape, want));
}

TEST(CkptReshard, ColumnSplitsReadRowByRow) {
  const Shape shape{3, 8};
  const auto boxes = split(shape, 1, 2);
  const Slice whole{{0, 0}, shape};
  const auto plans = plan_read(shape, boxes, whole);
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(plans[1].runs.size(), 3u);
  EXPECT_EQ(plans[1].runs[2].dst, 2u * 8 + 4);
  EXPECT_EQ(plans[1].runs[2].count, 4u);
  EXPECT_EQ(assemble(shape, boxes, whole), contents(shape, whole));
}

TEST(CkptReshard, ReplicasAreReadOnceAndScalarsWork) {
  const std::vector<Slice> replicas{{{0, 0}, {2, 2}}, {{0, 0}, {2, 2}}, {{0, 0}, {2, 2}}};
  const auto plans = plan_read({2, 2}, replicas, {{0, 0}, {2, 2}});
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].piece, 0u);
  const auto scalar = plan_read({}, {{{}, {}}}, {{}, {}});
  ASSERT_EQ(scalar.size(), 1u);
  EXPECT_EQ(scalar[0].runs[0].count, 1u);
  EXPECT_TRUE(plan_read({0, 4}, {{{0, 0}, {0, 4}}}, {{0, 0}, {0, 4}}).empty());
  EXPECT_THROW(plan_read({4}, {{{0}, {4}}}, {{2}, {3}}), std::invalid_argument);
}

TEST(CkptReshard, AnyWorldSizeReadsWhatAnyOtherWrote) {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t dims = 1 + rng() % 4;
    Shape shape;
    for (std::size_t d = 0; d < dims; ++d) shape.push_back(1 + rng() % 7);
    const std::size_t wdim = rng() % dims, rdim = rng() % dims;
    const unsigned wworld = 1 + rng() % 6, rworld = 1 + rng() % 6;
    const auto boxes = split(shape, wdim, wworld);
    ASSERT_EQ(tiling_problem(shape, boxes), "");
    for (unsigned r = 0; r < rworld; ++r) {
      const Slice want = even_split(shape, rdim, r, rworld);
      ASSERT_EQ(assemble(shape, boxes, want), contents(shape, want)) << "trial " << trial;
    }
  }
}

}  // namespace
}  // namespace dl::ckpt
