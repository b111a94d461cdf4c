#include "launcher/usage_report.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"

namespace dl {
namespace {

std::string range(const UsageQuery& q) {
  return fmt::format("[{}s:{}s]", q.period.count(), q.resolution.count());
}

double seconds_per_sample(const UsageQuery& q) { return static_cast<double>(q.resolution.count()); }

}  // namespace

std::string allocated_query(const UsageQuery& q) {
  return fmt::format("sum by ({}) (count_over_time(slurm_dl_gpu_utilization{}))", q.by, range(q));
}

std::string used_query(const UsageQuery& q) {
  return fmt::format("sum by ({}) (sum_over_time(slurm_dl_gpu_utilization{}))", q.by, range(q));
}

std::string jobs_query(const UsageQuery& q) {
  return fmt::format(
      "count by ({}) (count by ({}, jobid) (count_over_time(slurm_dl_gpu_utilization{})))", q.by,
      q.by, range(q));
}

void add_answer(UsageReport& report, const UsageQuery& q, std::string_view figure,
                const nlohmann::json& answer) {
  try {
    if (answer.at("status") != "success") {
      throw InputError(fmt::format("Prometheus answered {}: {}", answer.at("status").dump(),
                                   answer.value("error", std::string("no error text"))));
    }
    const auto& data = answer.at("data");
    if (data.at("resultType") != "vector") {
      throw InputError("Prometheus answered a " + data.at("resultType").dump() + ", not a vector");
    }
    for (const auto& r : data.at("result")) {
      const std::string key = r.at("metric").value(q.by, std::string());
      const double v = std::stod(r.at("value").at(1).get<std::string>());
      if (!std::isfinite(v)) continue;
      UsageRow& row = report[key];
      if (figure == "allocated") {
        row.gpu_hours_allocated = v * seconds_per_sample(q) / 3600.0;
      } else if (figure == "used") {
        row.gpu_hours_used = v / 100.0 * seconds_per_sample(q) / 3600.0;
      } else {
        row.jobs = static_cast<std::uint64_t>(std::llround(v));
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(
        fmt::format("Prometheus' answer is not what /api/v1/query returns: {}", e.what()));
  } catch (const std::invalid_argument&) {
    throw InputError("Prometheus' answer has a value that is not a number");
  }
}

std::string format_usage(const UsageReport& report, const UsageQuery& q) {
  std::string out =
      fmt::format("{:<16}{:>6}{:>16}{:>12}{:>8}\n", q.by == "user" ? "USER" : "ACCOUNT", "JOBS",
                  "GPU-H ALLOCATED", "GPU-H USED", "USED");
  UsageRow total;
  auto line = [&](const std::string& name, const UsageRow& r) {
    const std::string share =
        r.gpu_hours_allocated > 0
            ? fmt::format("{:.0f}%", 100 * r.gpu_hours_used / r.gpu_hours_allocated)
            : "-";
    out += fmt::format("{:<16}{:>6}{:>16.2f}{:>12.2f}{:>8}\n", name.empty() ? "(none)" : name,
                       r.jobs, r.gpu_hours_allocated, r.gpu_hours_used, share);
  };
  for (const auto& [name, r] : report) {
    line(name, r);
    total.jobs += r.jobs;
    total.gpu_hours_allocated += r.gpu_hours_allocated;
    total.gpu_hours_used += r.gpu_hours_used;
  }
  line("(all)", total);
  return out;
}

nlohmann::json usage_to_json(const UsageReport& report, const UsageQuery& q) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [name, r] : report) {
    rows.push_back({{q.by, name},
                    {"jobs", r.jobs},
                    {"gpu_hours_allocated", r.gpu_hours_allocated},
                    {"gpu_hours_used", r.gpu_hours_used}});
  }
  return {{"by", q.by},
          {"period_seconds", q.period.count()},
          {"resolution_seconds", q.resolution.count()},
          {"rows", rows}};
}

}  // namespace dl
