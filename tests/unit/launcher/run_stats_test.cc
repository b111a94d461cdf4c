#include "launcher/run_stats.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "core/error.h"

namespace dl {
namespace {

using std::chrono::seconds;

const WallTime t0 = WallClock::from_time_t(1'800'000'000);

RunRecord run_at(std::uint32_t run, std::uint32_t requeues, int started, int ended) {
  RunRecord r;
  r.job = "42";
  r.run = run;
  r.requeues = requeues;
  r.gpus = 2;
  r.started = t0 + seconds(started);
  r.updated = r.started;
  r.ended = t0 + seconds(ended);
  r.end = "completed";
  return r;
}

// Submitted at 0, allocated at 100, program from 110 to 1110 (60 s of checkpoints),
// requeued; allocated again at 1500, program 1510 to 2010, killed, restarted inside
// the allocation at 2020, done at 3020.
std::vector<RunRecord> three_runs() {
  auto a = run_at(0, 0, 110, 1110);
  a.submitted = t0;
  a.allocated = t0 + seconds(100);
  a.ckpt_seconds = 60;
  a.end = "requeued";
  auto b = run_at(1, 1, 1510, 2010);
  b.submitted = t0 + seconds(1110);  // Slurm's submit time anew after the requeue
  b.allocated = t0 + seconds(1500);
  b.end = "failed";
  auto c = run_at(2, 1, 2020, 3020);
  c.allocated = b.allocated;
  return {c, a, b};
}

TEST(RunStats, EverySecondFromSubmissionToEndInOnePart) {
  const auto rep = make_report(three_runs(), t0 + seconds(9999), JobNow::gone);
  EXPECT_EQ(rep.runs, 3u);
  EXPECT_EQ(rep.requeues, 1u);
  EXPECT_EQ(rep.restarts_inside, 1u);
  EXPECT_DOUBLE_EQ(rep.time.queued, 100);
  EXPECT_DOUBLE_EQ(rep.time.requeue_waits, 390);  // 1110 to 1500
  EXPECT_DOUBLE_EQ(rep.time.starting, 20);        // 100-110 and 1500-1510
  EXPECT_DOUBLE_EQ(rep.time.restarts, 10);        // 2010 to 2020
  EXPECT_DOUBLE_EQ(rep.time.checkpointing, 60);
  EXPECT_DOUBLE_EQ(rep.time.training, 940 + 500 + 1000);
  EXPECT_DOUBLE_EQ(rep.time.total(), 3020);
  EXPECT_EQ(rep.end, "completed");
  // 2 GPUs for 2500 s of runs; nothing sampled, so nothing said of their use.
  EXPECT_NEAR(rep.gpu_hours_allocated, 2 * 2500 / 3600.0, 1e-9);
  EXPECT_FALSE(rep.gpu_hours_used);
}

TEST(RunStats, GpuHoursUsedWeighTheSampledUtilization) {
  auto runs = three_runs();
  for (auto& r : runs) {
    r.add_samples("n1", {{0, 80, 10ull << 30, 80ull << 30}, {1, 40, 20ull << 30, 80ull << 30}});
    r.add_samples("n1", {{0, 80, 12ull << 30, 80ull << 30}, {1, 40, 5ull << 30, 80ull << 30}});
  }
  const auto rep = make_report(runs, t0, JobNow::gone);
  ASSERT_TRUE(rep.gpu_hours_used);
  EXPECT_NEAR(*rep.gpu_hours_used, rep.gpu_hours_allocated * 0.6, 1e-9);
  ASSERT_EQ(rep.per_gpu.size(), 2u);
  EXPECT_EQ(rep.per_gpu[0].gpu, "n1/0");
  EXPECT_EQ(rep.per_gpu[0].totals.samples, 6u);
  EXPECT_EQ(rep.per_gpu[0].totals.mem_peak, 12ull << 30);
  EXPECT_EQ(rep.per_gpu[1].totals.util_sum, 6u * 40);
  const std::string text = format_report(rep);
  EXPECT_NE(text.find("GPU-hours: 1.39 allocated, 0.83 used (60%)"), std::string::npos) << text;
  EXPECT_NE(text.find("n1/0              80%  12.0/80.0 GiB"), std::string::npos) << text;
}

TEST(RunStats, ARunningJobsOpenRunEndsNowAPendingOneWaits) {
  auto runs = three_runs();
  runs[0].ended.reset();  // run 2, still running: its record was written at 2500
  runs[0].updated = t0 + seconds(2500);
  runs[0].end.clear();
  const auto live = make_report(runs, t0 + seconds(2600), JobNow::running);
  EXPECT_DOUBLE_EQ(live.time.total(), 2600);
  EXPECT_EQ(live.end, "");
  const auto killed = make_report(runs, t0 + seconds(2600), JobNow::gone);
  EXPECT_DOUBLE_EQ(killed.time.total(), 2500);

  auto requeued = three_runs();
  const auto pending = make_report(requeued, t0 + seconds(4000), JobNow::pending);
  EXPECT_DOUBLE_EQ(pending.time.requeue_waits, 390 + 980);
  EXPECT_EQ(pending.end, "pending again");
}

TEST(RunStats, RecordsRoundTripThroughAPrivateDirectory) {
  const auto root =
      std::filesystem::temp_directory_path() / ("run_stats_test." + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  auto runs = three_runs();
  runs[1].add_samples("n2", {{3, 55, 1ull << 30, 16ull << 30}});
  runs[1].step = 1234;
  for (const auto& r : runs) save_run_record(root.string(), r);
  std::filesystem::create_directories(root / "42");
  {
    std::FILE* f = std::fopen((root / "42" / "run-9.json").c_str(), "w");
    std::fputs("{\"format\": 1}", f);
    std::fclose(f);
  }
  std::vector<std::string> skipped;
  const auto back = load_run_records(root.string(), "42", &skipped);
  ASSERT_EQ(back.size(), 3u);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("run-9.json"), std::string::npos);
  EXPECT_EQ(back[0].run, 0u);
  EXPECT_EQ(back[0].step, 1234);
  EXPECT_EQ(back[0].gpu.at({"n2", 3}).util_sum, 55u);
  EXPECT_EQ(std::filesystem::status(root / "42").permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_all);
  EXPECT_DOUBLE_EQ(make_report(back, t0, JobNow::gone).time.total(), 3020);
  EXPECT_TRUE(load_run_records(root.string(), "43", nullptr).empty());
  EXPECT_THROW(load_run_records(root.string(), "../42", nullptr), InputError);
  std::filesystem::remove_all(root);
}

TEST(RunStats, WhereTheRecordsLive) {
  EXPECT_EQ(stats_root("/s", "/home/u"), "/s");
  EXPECT_EQ(stats_root(nullptr, "/home/u"), "/home/u/.slurm-dl/jobs");
  EXPECT_EQ(stats_root("", "/home/u"), "/home/u/.slurm-dl/jobs");
  EXPECT_THROW(stats_root("rel", "/home/u"), InputError);
  EXPECT_THROW(stats_root(nullptr, nullptr), InputError);
}

}  // namespace
}  // namespace dl
