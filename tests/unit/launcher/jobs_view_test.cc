// dl-jobs' pure part: which jobs are DL jobs, the status line read back, the
// expected start as people say it, the JSON scripts rely on.
#include "launcher/jobs_view.h"

#include <gtest/gtest.h>

namespace dl {
namespace {

using namespace std::chrono_literals;

TEST(JobsView, DlJobsAreThoseWithTheirComment) {
  EXPECT_TRUE(is_dl_comment("dl: 4 GPUs as 2x2, preemptible"));
  EXPECT_TRUE(is_dl_comment("dl | RUNNING step 3"));
  EXPECT_FALSE(is_dl_comment(""));
  EXPECT_FALSE(is_dl_comment("dlx: mine"));
  EXPECT_FALSE(is_dl_comment("my dl: note"));
}

TEST(JobsView, StatusLineRoundTrips) {
  Status s;
  s.phase = JobPhase::checkpointing;
  s.step = 1200;
  s.ckpt_step = 1100;
  s.ckpt_age = 120s;
  s.gpu = GpuFigures{85, 80, 12ull << 30, 80ull << 30, std::nullopt};
  s.restarts = 3;
  s.metrics = "loss=0.31 acc=0.9";
  s.metrics_step = 1150;
  s.detail = "";
  EXPECT_EQ(format_status(s),
            "CHECKPOINTING step 1200, ckpt 1100 (2m ago), gpu 85% (avg 80%) 12.0/80.0 GiB, "
            "restarts 3, loss=0.31 acc=0.9 (step 1150)");
  const auto back = parse_status(merge_comment("dl: 16 GPUs as 2x8", format_status(s)));
  ASSERT_TRUE(back);
  ASSERT_TRUE(back->gpu);
  EXPECT_EQ(back->gpu->util, 85u);
  EXPECT_EQ(back->gpu->util_avg, 80u);
  EXPECT_EQ(back->phase, JobPhase::checkpointing);
  EXPECT_EQ(back->step, 1200);
  EXPECT_EQ(back->ckpt_step, 1100);
  EXPECT_EQ(back->ckpt_age, 120s);
  EXPECT_EQ(back->restarts, 3u);
  EXPECT_EQ(back->metrics, "loss=0.31 acc=0.9");
  EXPECT_EQ(back->metrics_step, 1150);

  Status held;
  held.phase = JobPhase::held;
  held.step = 7;
  held.detail = "3 restarts without a new checkpoint";
  const auto h = parse_status("dl | " + format_status(held));
  ASSERT_TRUE(h);
  EXPECT_EQ(h->phase, JobPhase::held);
  EXPECT_EQ(h->step, 7);
  EXPECT_FALSE(h->ckpt_step) << "\"no checkpoint yet\"";
  EXPECT_EQ(h->metrics, "");
  EXPECT_EQ(h->detail, "3 restarts without a new checkpoint");
  EXPECT_FALSE(h->gpu);
  EXPECT_FALSE(h->restarts);
}

TEST(JobsView, RestartsCountThoseInsideTheAllocation) {
  JobRow r;
  r.requeues = 1;
  r.comment = "dl: 4 GPUs as 2x2 | RUNNING step 40";
  EXPECT_EQ(restarts_of(r), 1u) << "no restart inside the allocation";
  r.comment = "dl: 4 GPUs as 2x2 | RUNNING step 40, ckpt 30 (5s ago), restarts 3, loss=0.5";
  EXPECT_EQ(restarts_of(r), 3u) << "one requeue, then two restarts inside the allocation";
  EXPECT_EQ(parse_status(r.comment)->metrics, "loss=0.5");
  r.requeues = 4;
  EXPECT_EQ(restarts_of(r), 4u) << "requeued since the line was written";
  const SystemTime now = std::chrono::system_clock::from_time_t(1'700'000'000);
  r.requeues = 1;
  const auto j = to_json({r}, now);
  EXPECT_EQ(j["jobs"][0]["restarts"], 3);
  EXPECT_EQ(j["jobs"][0]["requeues"], 1);
}

TEST(JobsView, NoStatusBeforeDlrunRan) {
  EXPECT_FALSE(parse_status("dl: 4 GPUs as 2x2"));
  EXPECT_FALSE(parse_status("dl: 4 GPUs | something else"));
  EXPECT_EQ(shape_of("dl: 4 GPUs as 2x2, preemptible | RUNNING"), "4 GPUs as 2x2, preemptible");
  EXPECT_EQ(shape_of("dl | RUNNING"), "");
}

TEST(JobsView, ExpectedStartOfAPendingJob) {
  const SystemTime now = std::chrono::system_clock::from_time_t(1'700'000'000);
  JobRow r;
  r.state = "PENDING";
  EXPECT_EQ(describe_start(r, now), "unknown") << "before backfill's first estimate";
  r.start = now + 300s;
  EXPECT_EQ(describe_start(r, now).rfind("in 5m (at ", 0), 0u) << describe_start(r, now);
  r.state = "RUNNING";
  r.start = now - 3h;
  EXPECT_EQ(describe_start(r, now), "started 3h ago");
  r.state = "CANCELLED";
  EXPECT_EQ(describe_start(r, now), "") << "an ended job starts no more";
}

TEST(JobsView, JsonForScripts) {
  const SystemTime now = std::chrono::system_clock::from_time_t(1'700'000'000);
  JobRow pending;
  pending.id = "12";
  pending.state = "PENDING";
  pending.reason = "Resources";
  pending.comment = "dl: 2 GPUs as 1x2";
  pending.start = now + 90s;
  JobRow running;
  running.id = "100_3";
  running.state = "RUNNING";
  running.requeues = 2;
  running.comment =
      "dl: 4 GPUs as 2x2 | RUNNING step 40, ckpt 30 (5s ago), gpu 85% (avg 80%) 12.0/80.0 GiB, "
      "loss=0.5";
  running.start = now - 60s;
  const auto j = to_json({pending, running}, now);
  ASSERT_EQ(j["jobs"].size(), 2u);
  EXPECT_EQ(j["jobs"][0]["reason"], "Resources");
  EXPECT_EQ(j["jobs"][0]["expected_start_in_s"], 90);
  EXPECT_EQ(j["jobs"][0]["expected_start"], "2023-11-14T22:14:50Z");
  EXPECT_TRUE(j["jobs"][0]["start_time"].is_null());
  EXPECT_TRUE(j["jobs"][0]["status"].is_null());
  EXPECT_EQ(j["jobs"][1]["id"], "100_3");
  EXPECT_EQ(j["jobs"][1]["restarts"], 2);
  EXPECT_EQ(j["jobs"][1]["requeues"], 2);
  EXPECT_EQ(j["jobs"][1]["shape"], "4 GPUs as 2x2");
  EXPECT_EQ(j["jobs"][1]["status"]["step"], 40);
  EXPECT_EQ(j["jobs"][1]["status"]["ckpt_step"], 30);
  EXPECT_EQ(j["jobs"][1]["status"]["metrics"], "loss=0.5");
  EXPECT_EQ(j["jobs"][1]["status"]["gpu"]["util"], 85);
  EXPECT_EQ(j["jobs"][1]["status"]["gpu"]["util_avg"], 80);
  EXPECT_EQ(j["jobs"][1]["status"]["gpu"]["mem_used_gib"], 12.0);
  EXPECT_EQ(j["jobs"][1]["status"]["gpu"]["mem_total_gib"], 80.0);
  EXPECT_TRUE(j["jobs"][0]["status"].is_null());
  EXPECT_TRUE(j["jobs"][1]["expected_start"].is_null());

  const std::string table = format_table({pending, running}, now);
  EXPECT_NE(table.find("PENDING (Resources)"), std::string::npos) << table;
  EXPECT_NE(table.find("loss=0.5"), std::string::npos) << table;
  EXPECT_NE(table.find(" GPU "), std::string::npos) << table;
  EXPECT_NE(table.find("85% (avg 80%) 12.0/80.0 GiB"), std::string::npos) << table;
}

TEST(JobsView, OtherUsersTextIsEscapedInTheTable) {
  const SystemTime now = std::chrono::system_clock::from_time_t(1'700'000'000);
  JobRow row;
  row.id = "7";
  row.name = "x\x1b]0;owned\ay";
  row.state = "RUNNING";
  row.comment = "dl: 1 GPU | RUNNING step 4, loss=\x1b[2Jred";
  const std::string table = format_table({row}, now);
  EXPECT_EQ(table.find('\x1b'), std::string::npos) << table;
  EXPECT_EQ(table.find('\a'), std::string::npos) << table;
  EXPECT_NE(table.find("x\\x1b]0;owned\\x07y"), std::string::npos) << table;
  EXPECT_NE(table.find("loss=\\x1b[2Jred"), std::string::npos) << table;
  // Scripts get the text as it is (JSON escapes it).
  EXPECT_EQ(to_json({row}, now)["jobs"][0]["name"], row.name);
}

}  // namespace
}  // namespace dl
