#include "launcher/usage_report.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace dl {
namespace {

nlohmann::json vector_answer(const std::string& by,
                             std::vector<std::pair<std::string, std::string>> rows) {
  nlohmann::json result = nlohmann::json::array();
  for (const auto& [key, value] : rows) {
    nlohmann::json metric = nlohmann::json::object();
    metric[by] = key;
    result.push_back({{"metric", metric}, {"value", {1800000000.0, value}}});
  }
  return {{"status", "success"}, {"data", {{"resultType", "vector"}, {"result", result}}}};
}

TEST(UsageReport, QueriesCountEachGpuAtTheResolution) {
  UsageQuery q;
  q.by = "account";
  q.period = std::chrono::hours(24);
  q.resolution = std::chrono::seconds(60);
  EXPECT_EQ(allocated_query(q),
            "sum by (account) (count_over_time(slurm_dl_gpu_utilization[86400s:60s]))");
  EXPECT_EQ(used_query(q),
            "sum by (account) (sum_over_time(slurm_dl_gpu_utilization[86400s:60s]))");
  EXPECT_EQ(jobs_query(q),
            "count by (account) (count by (account, jobid) "
            "(count_over_time(slurm_dl_gpu_utilization[86400s:60s])))");
}

TEST(UsageReport, GpuHoursFromSamplesAndUtilization) {
  UsageQuery q;
  q.resolution = std::chrono::seconds(60);
  UsageReport r;
  // alice: 2 GPUs for 3 hours (360 one-minute samples) at 75%; bob: 60 samples at 10%.
  add_answer(r, q, "allocated", vector_answer("user", {{"alice", "360"}, {"bob", "60"}}));
  add_answer(r, q, "used", vector_answer("user", {{"alice", "27000"}, {"bob", "600"}}));
  add_answer(r, q, "jobs", vector_answer("user", {{"alice", "2"}, {"bob", "1"}}));
  EXPECT_DOUBLE_EQ(r["alice"].gpu_hours_allocated, 6.0);
  EXPECT_DOUBLE_EQ(r["alice"].gpu_hours_used, 4.5);
  EXPECT_EQ(r["alice"].jobs, 2u);
  EXPECT_DOUBLE_EQ(r["bob"].gpu_hours_used, 0.1);
  const std::string text = format_usage(r, q);
  EXPECT_NE(text.find("alice                2            6.00        4.50     75%"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("(all)                3            7.00        4.60     66%"),
            std::string::npos)
      << text;
  EXPECT_EQ(usage_to_json(r, q)["rows"][1]["user"], "bob");
}

TEST(UsageReport, RefusesWhatIsNotAVectorAnswer) {
  UsageQuery q;
  UsageReport r;
  EXPECT_THROW(add_answer(r, q, "used", {{"status", "error"}, {"error", "parse error"}}),
               InputError);
  EXPECT_THROW(
      add_answer(r, q, "used", {{"status", "success"}, {"data", {{"resultType", "matrix"}}}}),
      InputError);
  EXPECT_THROW(add_answer(r, q, "used", nlohmann::json::array()), InputError);
  EXPECT_THROW(add_answer(r, q, "used", vector_answer("user", {{"a", "x"}})), InputError);
}

}  // namespace
}  // namespace dl
