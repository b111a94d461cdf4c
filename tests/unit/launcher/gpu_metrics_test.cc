#include "launcher/gpu_metrics.h"

#include <gtest/gtest.h>

#include <string>

namespace dl {
namespace {

constexpr std::uint64_t kMiB = 1 << 20;

TEST(GpuMetrics, EscapesLabelValues) {
  EXPECT_EQ(prometheus_label_value("plain-name_1.x"), "plain-name_1.x");
  EXPECT_EQ(prometheus_label_value("a\"b"), "a\\\"b");
  EXPECT_EQ(prometheus_label_value("a\\b"), "a\\\\b");
  EXPECT_EQ(prometheus_label_value("a\nb"), "a\\nb");
  EXPECT_EQ(prometheus_label_value("\"} 1\n"), "\\\"} 1\\n");
}

TEST(GpuMetrics, WritesOnlyTheGpusJobsHoldHere) {
  const std::vector<GpuOwner> owners = {{"n1", 7, 1000, "dltest", {1}, "vision"},
                                        {"n2", 8, 1001, "other", {0}, ""}};
  const std::vector<GpuReading> samples = {{{0, 10, 2000 * kMiB, 80000 * kMiB}, 60000u},
                                           {{1, 80, 30000 * kMiB, 80000 * kMiB}, 250500u}};
  EXPECT_EQ(format_gpu_metrics("n1", owners, samples),
            "# HELP slurm_dl_gpu_utilization Percent of the last sample period a kernel ran on "
            "the GPU.\n"
            "# TYPE slurm_dl_gpu_utilization gauge\n"
            "slurm_dl_gpu_utilization{jobid=\"7\",user=\"dltest\",account=\"vision\",node=\"n1\","
            "gpu=\"1\"} 80\n"
            "# HELP slurm_dl_gpu_memory_used_bytes GPU memory in use, in bytes.\n"
            "# TYPE slurm_dl_gpu_memory_used_bytes gauge\n"
            "slurm_dl_gpu_memory_used_bytes{jobid=\"7\",user=\"dltest\",account=\"vision\",node="
            "\"n1\",gpu=\"1\"} "
            "31457280000\n"
            "# HELP slurm_dl_gpu_memory_total_bytes GPU memory in all, in bytes.\n"
            "# TYPE slurm_dl_gpu_memory_total_bytes gauge\n"
            "slurm_dl_gpu_memory_total_bytes{jobid=\"7\",user=\"dltest\",account=\"vision\",node="
            "\"n1\",gpu=\"1\"} "
            "83886080000\n"
            "# HELP slurm_dl_gpu_power_watts Power the GPU draws, in watts.\n"
            "# TYPE slurm_dl_gpu_power_watts gauge\n"
            "slurm_dl_gpu_power_watts{jobid=\"7\",user=\"dltest\",account=\"vision\",node=\"n1\","
            "gpu=\"1\"} 250.5\n");
}

TEST(GpuMetrics, KeepsHelpLinesAndSkipsPowerItDoesNotHave) {
  const std::vector<GpuOwner> owners = {{"n1", 7, 1000, "a", {0}, ""}};
  const std::vector<GpuReading> samples = {{{0, 5, 0, kMiB}, std::nullopt}};
  const std::string out = format_gpu_metrics("n1", owners, samples);
  EXPECT_NE(out.find("slurm_dl_gpu_utilization{jobid=\"7\",user=\"a\",account=\"\",node=\"n1\",gpu="
                     "\"0\"} 5\n"),
            std::string::npos);
  EXPECT_NE(out.find("# TYPE slurm_dl_gpu_power_watts gauge\n"), std::string::npos);
  EXPECT_EQ(out.find("slurm_dl_gpu_power_watts{"), std::string::npos);
  const std::string none = format_gpu_metrics("n1", {}, samples);
  EXPECT_EQ(none.find("{"), std::string::npos);
  EXPECT_NE(none.find("# HELP slurm_dl_gpu_utilization"), std::string::npos);
}

TEST(GpuMetrics, ShowsAGpuUnderEachJobThatClaimsIt) {
  const std::vector<GpuOwner> owners = {{"n1", 7, 1, "a", {0}, ""}, {"n1", 9, 2, "b", {0}, ""}};
  const std::string out = format_gpu_metrics("n1", owners, {{{0, 5, 0, kMiB}, std::nullopt}});
  EXPECT_NE(out.find("{jobid=\"7\",user=\"a\""), std::string::npos);
  EXPECT_NE(out.find("{jobid=\"9\",user=\"b\""), std::string::npos);
}

}  // namespace
}  // namespace dl
