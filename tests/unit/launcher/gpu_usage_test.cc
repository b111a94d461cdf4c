// What dlrun reports of a job's GPUs: Slurm's GPU indices, the GPU message, rank 0's
// figures and the status line's text.
#include "launcher/gpu_usage.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace dl {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kGiB = 1ull << 30;

TEST(GpuUsage, SlurmIndicesFromTheStepElseTheJob) {
  EXPECT_EQ(slurm_gpu_indices("1,3", "0,1,2,3"), (std::vector<unsigned>{1, 3}));
  EXPECT_EQ(slurm_gpu_indices(nullptr, "0,2"), (std::vector<unsigned>{0, 2}));
  EXPECT_EQ(slurm_gpu_indices("", "5"), (std::vector<unsigned>{5}));
  EXPECT_TRUE(slurm_gpu_indices(nullptr, nullptr).empty());
  // Anything but a list of numbers is no list: nothing is sampled rather than a guess.
  EXPECT_TRUE(slurm_gpu_indices("0-3", nullptr).empty());
  EXPECT_TRUE(slurm_gpu_indices("0,,1", nullptr).empty());
  EXPECT_TRUE(slurm_gpu_indices("N/A", nullptr).empty());
}

TEST(GpuUsage, SamplesRoundTripThroughTheMessage) {
  const std::vector<GpuSample> in = {{0, 85, 12 * kGiB, 80 * kGiB}, {3, 0, 0, 80 * kGiB}};
  const std::string text = format_gpu_samples(in);
  EXPECT_EQ(text, "0:85:12288:81920 3:0:0:81920");
  const auto out = parse_gpu_samples(text);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].minor, 0u);
  EXPECT_EQ(out[0].util, 85u);
  EXPECT_EQ(out[0].mem_used, 12 * kGiB);
  EXPECT_EQ(out[1].minor, 3u);
  EXPECT_EQ(out[1].mem_total, 80 * kGiB);
  EXPECT_TRUE(parse_gpu_samples("").empty());
}

TEST(GpuUsage, AMalformedMessageIsAnError) {
  for (const char* bad : {"0:85:1", "0:101:1:2", "a:1:1:1", "0:1:1:1  1:1:1:1", "0:-1:1:1"}) {
    EXPECT_THROW(parse_gpu_samples(bad), SystemError) << bad;
  }
  std::string many;
  for (int i = 0; i < 65; ++i) many += (i ? " " : "") + std::to_string(i) + ":1:1:1";
  EXPECT_THROW(parse_gpu_samples(many), SystemError) << "more GPUs than a node has";
}

TEST(GpuUsage, FiguresAreTheMeanNowAndOverTheRun) {
  GpuUsage usage;
  const auto t = GpuUsage::Steady::now();
  EXPECT_FALSE(usage.figures(t)) << "nothing before the first sample";
  usage.record("n1", {{0, 90, 10 * kGiB, 80 * kGiB}, {1, 70, 6 * kGiB, 80 * kGiB}}, t);
  usage.record("n2", {{0, 50, 4 * kGiB, 80 * kGiB}, {1, 30, 4 * kGiB, 80 * kGiB}}, t);
  auto g = usage.figures(t);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->util, 60u);
  EXPECT_EQ(g->util_avg, 60u);
  EXPECT_EQ(g->mem_used, 24 * kGiB);
  EXPECT_EQ(g->mem_total, 320 * kGiB);
  // n1's next samples replace its last ones; the average keeps them all.
  usage.record("n1", {{0, 10, kGiB, 80 * kGiB}, {1, 10, kGiB, 80 * kGiB}}, t);
  g = usage.figures(t);
  EXPECT_EQ(g->util, 25u);
  EXPECT_EQ(g->util_avg, 43u);  // 260 / 6
  EXPECT_EQ(g->mem_used, 10 * kGiB);
  EXPECT_FALSE(g->idle) << "no idle rule";
}

TEST(GpuUsage, TheIdleRuleFlagsAJobWhoseEveryGpuStaysBelowItsThreshold) {
  using namespace std::chrono_literals;
  GpuUsage usage(IdleRule{5, 30min});
  const auto t = GpuUsage::Steady::now();
  const auto both = [&](unsigned a, unsigned b, GpuUsage::Steady::time_point at) {
    usage.record("n1", {{0, a, 0, kGiB}}, at);
    usage.record("n2", {{0, b, 0, kGiB}}, at);
  };
  both(0, 4, t);
  EXPECT_FALSE(usage.figures(t + 29min)->idle) << "not for long enough yet";
  both(1, 0, t + 20min);
  const auto g = usage.figures(t + 31min);
  ASSERT_TRUE(g->idle);
  EXPECT_EQ(*g->idle, 31min);
  EXPECT_EQ(format_gpu_figures(*g), "gpu 1% (avg 1%) 0.0/2.0 GiB idle 31m");
  EXPECT_EQ(parse_gpu_figures("gpu 1% (avg 1%) 0.0/2.0 GiB idle 31m")->idle, 31min);
  // One busy GPU of the job is enough to clear the flag, and the clock starts again.
  both(80, 0, t + 32min);
  EXPECT_FALSE(usage.figures(t + 33min)->idle);
  both(0, 0, t + 34min);
  EXPECT_FALSE(usage.figures(t + 63min)->idle);
  EXPECT_EQ(usage.figures(t + 64min)->idle, 30min);

  // A job at 80% is never flagged.
  GpuUsage busy(IdleRule{5, 30min});
  busy.record("n1", {{0, 80, 0, kGiB}}, t);
  EXPECT_FALSE(busy.figures(t + 48h)->idle);
}

TEST(GpuUsage, TheIdleRuleOption) {
  using namespace std::chrono_literals;
  EXPECT_FALSE(parse_idle_rule("--gpu-idle", "off"));
  const auto r = parse_idle_rule("--gpu-idle", "10%:1h");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->below, 10u);
  EXPECT_EQ(r->after, 1h);
  for (const char* bad :
       {"", "10", "10%", "10:1h", "0%:1h", "101%:1h", "5%:9s", "5%:8d", "x%:1h", "5%:"}) {
    try {
      parse_idle_rule("--gpu-idle", bad);
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("--gpu-idle=") + bad +
                    ": expected off or UTIL%:DURATION with UTIL from 1 to 100 and DURATION from "
                    "10s to 7d, e.g. 5%:30m");
    }
  }
}

TEST(GpuUsage, StatusTextRoundTrips) {
  GpuFigures g;
  g.util = 85;
  g.util_avg = 80;
  g.mem_used = 12 * kGiB + 512 * kMiB;
  g.mem_total = 80 * kGiB;
  const std::string text = format_gpu_figures(g);
  EXPECT_EQ(text, "gpu 85% (avg 80%) 12.5/80.0 GiB");
  const auto back = parse_gpu_figures(text);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->util, 85u);
  EXPECT_EQ(back->util_avg, 80u);
  EXPECT_EQ(back->mem_used, g.mem_used);
  EXPECT_EQ(back->mem_total, g.mem_total);
  g.util_avg.reset();
  EXPECT_EQ(format_gpu_figures(g), "gpu 85% 12.5/80.0 GiB");
  EXPECT_EQ(parse_gpu_figures("gpu 85% 12.5/80.0 GiB")->util_avg, std::nullopt);
  for (const char* bad : {"gpu", "gpu 85%", "gpu x% 1.0/2.0 GiB", "gpu 85% (avg 80% 1.0/2.0 GiB",
                          "gpu 85% 1/2 GiB", "gpu 185% 1.0/2.0 GiB", "loss=0.3"}) {
    EXPECT_FALSE(parse_gpu_figures(bad)) << bad;
  }
}

}  // namespace
}  // namespace dl
