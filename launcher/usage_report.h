// dl-gpu-usage: GPU-hours allocated and used per user or account over a period, from
// the series dl-gpu-metrics exports (slurm_dl_gpu_utilization, one per job, node and
// GPU) as Prometheus keeps them. Pure: the queries and the report; the HTTP call is the
// tool's (launcher/dl_gpu_usage.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace dl {

struct UsageQuery {
  std::string by = "user";  // or "account"
  std::chrono::seconds period{7 * 24 * 3600};
  std::chrono::seconds resolution{60};  // the subquery's step: each GPU counted so often
};

// PromQL for each figure, grouped by `by`: GPU samples (allocated), the sum of their
// utilization (used) and the jobs.
std::string allocated_query(const UsageQuery& q);
std::string used_query(const UsageQuery& q);
std::string jobs_query(const UsageQuery& q);

struct UsageRow {
  double gpu_hours_allocated = 0;
  double gpu_hours_used = 0;
  std::uint64_t jobs = 0;
};
using UsageReport = std::map<std::string, UsageRow>;  // by user or account

// Adds one query's answer (Prometheus' /api/v1/query JSON) to `report`: `figure` is
// "allocated", "used" or "jobs". Throws dl::InputError for an answer that is not a
// successful vector.
void add_answer(UsageReport& report, const UsageQuery& q, std::string_view figure,
                const nlohmann::json& answer);

std::string format_usage(const UsageReport& report, const UsageQuery& q);
nlohmann::json usage_to_json(const UsageReport& report, const UsageQuery& q);

}  // namespace dl
