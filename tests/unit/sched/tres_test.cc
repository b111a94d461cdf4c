#include "sched/tres.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace dl {
namespace {

TEST(Tres, CountsGpuEntries) {
  EXPECT_EQ(gpus_in_tres("gres:gpu:2"), 2u);
  EXPECT_EQ(gpus_in_tres("gres:gpu"), 1u);
  EXPECT_EQ(gpus_in_tres("gres:gpu:a100:4"), 4u);
  EXPECT_EQ(gpus_in_tres("gres:gpu:a100"), 1u);
  EXPECT_EQ(gpus_in_tres("gpu:3"), 3u);
  EXPECT_EQ(gpus_in_tres("gres/gpu:8"), 8u);
  EXPECT_EQ(gpus_in_tres("gres:mps:100,gres:gpu:2,gres:gpu:v100:1"), 3u);
}

TEST(Tres, NoGpuEntryIsNotAGpuRequest) {
  EXPECT_FALSE(gpus_in_tres(""));
  EXPECT_FALSE(gpus_in_tres("gres:mps:100"));
  EXPECT_FALSE(gpus_in_tres("license:matlab:1"));
  EXPECT_FALSE(gpus_in_tres("gres:gpus:2"));
}

TEST(Tres, MalformedCountIsRejected) {
  EXPECT_THROW(gpus_in_tres("gres:gpu:a100:x"), InputError);
  EXPECT_THROW(gpus_in_tres("gres:gpu:a:b:2"), InputError);
  EXPECT_THROW(gpus_in_tres("gres:gpu:a100:-1"), InputError);
}

TEST(Tres, WithoutGpusKeepsTheRestInOrder) {
  EXPECT_EQ(without_gpus("gres:gpu:2"), "");
  EXPECT_EQ(without_gpus(""), "");
  EXPECT_EQ(without_gpus("gres:mps:100,gres:gpu:2,gres:shard:4"), "gres:mps:100,gres:shard:4");
  EXPECT_EQ(without_gpus("gres:gpu:a100:1,license:x"), "license:x");
}

TEST(Tres, RequestedGpusPrefersPerJobThenPerNodeThenPerTask) {
  EXPECT_FALSE(requested_gpus({}));
  EXPECT_EQ(requested_gpus({"gres:gpu:16", "gres:gpu:8", "", "", 4, 4}), 16u);
  EXPECT_EQ(requested_gpus({"", "gres:gpu:8", "", "", 2, 0}), 16u);
  EXPECT_EQ(requested_gpus({"", "gres:gpu:8", "", "", 0, 0}), 8u);
  EXPECT_EQ(requested_gpus({"", "", "", "gres:gpu:1", 1, 4}), 4u);
  EXPECT_EQ(requested_gpus({"", "", "", "gres:gpu:2", 0, 0}), 2u);
}

TEST(Tres, GpusPerSocketCannotBeTotalled) {
  try {
    requested_gpus({"", "", "gres:gpu:1", "", 1, 1});
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(
        e.what(),
        "--gpus-per-socket: the total depends on the nodes Slurm picks; give only --dl-gpus");
  }
}

}  // namespace
}  // namespace dl
