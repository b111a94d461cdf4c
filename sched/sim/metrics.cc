#include "sched/sim/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dl::sim {

Usage::Usage(double first_submit, double last_submit)
    : begin_(first_submit), end_(last_submit), last_(first_submit) {
  // Jobs all submitted at once: the whole run instead.
  if (end_ <= begin_) end_ = std::numeric_limits<double>::infinity();
}

void Usage::add_pending(std::uint32_t gpus) { pending_.insert(gpus); }

void Usage::remove_pending(std::uint32_t gpus) { pending_.erase(pending_.find(gpus)); }

void Usage::add_used(std::int64_t gpus) { used_ += gpus; }

void Usage::account(double t, std::int64_t free_gpus, std::int64_t most_free_on_a_node) {
  const double a = std::max(last_, begin_), b = std::min(t, end_);
  if (b > a) {
    used_gpu_s_ += static_cast<double>(used_) * (b - a);
    if (!pending_.empty() && *pending_.begin() <= free_gpus) {
      idle_fit_gpu_s_ += static_cast<double>(free_gpus) * (b - a);
    }
    if (!pending_.empty() && *pending_.begin() <= most_free_on_a_node) {
      idle_node_fit_gpu_s_ += static_cast<double>(free_gpus) * (b - a);
    }
  }
  last_ = std::max(last_, t);
}

double Usage::capacity(double cluster_gpus, double last_end) const {
  return cluster_gpus * (std::min(end_, last_end) - begin_);
}

double Usage::gpu_util(double cluster_gpus, double last_end) const {
  const double c = capacity(cluster_gpus, last_end);
  return c > 0 ? used_gpu_s_ / c : 0;
}

double Usage::idle_while_fit(double cluster_gpus, double last_end) const {
  const double c = capacity(cluster_gpus, last_end);
  return c > 0 ? idle_fit_gpu_s_ / c : 0;
}

double Usage::idle_while_node_fit(double cluster_gpus, double last_end) const {
  const double c = capacity(cluster_gpus, last_end);
  return c > 0 ? idle_node_fit_gpu_s_ / c : 0;
}

Result summarize(std::vector<JobOutcome> outcomes, const Usage& usage, double cluster_gpus) {
  Result r;
  r.jobs = outcomes.size();
  if (outcomes.empty()) return r;
  std::vector<double> jct;
  jct.reserve(outcomes.size());
  double queue = 0, first_submit = std::numeric_limits<double>::infinity(), last_finish = 0;
  for (const auto& j : outcomes) {
    jct.push_back(j.end_s - j.submit_s);
    queue += j.start_s - j.submit_s;
    first_submit = std::min(first_submit, j.submit_s);
    last_finish = std::max(last_finish, j.end_s);
  }
  std::sort(jct.begin(), jct.end());
  const auto pct = [&](double q) {
    const auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(jct.size())));
    return jct[std::clamp<std::size_t>(k, 1, jct.size()) - 1];
  };
  double sum = 0;
  for (const auto x : jct) sum += x;
  r.avg_jct_s = sum / static_cast<double>(jct.size());
  r.p50_jct_s = pct(0.50);
  r.p95_jct_s = pct(0.95);
  r.avg_queue_s = queue / static_cast<double>(outcomes.size());
  r.makespan_s = last_finish - first_submit;
  r.gpu_util = usage.gpu_util(cluster_gpus, last_finish);
  r.idle_while_fit = usage.idle_while_fit(cluster_gpus, last_finish);
  r.idle_while_node_fit = usage.idle_while_node_fit(cluster_gpus, last_finish);
  r.outcomes = std::move(outcomes);
  return r;
}

}  // namespace dl::sim
