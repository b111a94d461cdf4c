#include "sched/priority.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/parse.h"

namespace dl {

using std::chrono::seconds;

PriorityParams parse_priority_params(std::string_view text) {
  PriorityParams p;
  bool queues_given = false;
  bool starve_given = false;
  std::size_t start = 0;
  while (start < text.size()) {
    const auto end = std::min(text.find(',', start), text.size());
    const auto item = text.substr(start, end - start);
    start = end + 1;
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) {
      throw InputError(fmt::format("priority parameter '{}': expected key=value", item));
    }
    const auto key = item.substr(0, eq);
    const auto value = item.substr(eq + 1);
    const std::string label(key);
    constexpr std::uint64_t kMaxWeight = 1000000000;
    if (key == "las_weight") {
      p.las_weight = static_cast<std::uint32_t>(parse_uint(label, value, 0, kMaxWeight));
    } else if (key == "age_weight") {
      p.age_weight = static_cast<std::uint32_t>(parse_uint(label, value, 0, kMaxWeight));
    } else if (key == "service_unit") {
      p.service_unit = parse_duration(label, value, seconds(1), seconds(86400L * 365));
    } else if (key == "levels") {
      p.levels = static_cast<std::uint32_t>(parse_uint(label, value, 1, 1000));
    } else if (key == "age_period") {
      p.age_period = parse_duration(label, value, seconds(1), seconds(86400L * 365));
    } else if (key == "interval") {
      p.interval = parse_duration(label, value, seconds(1), seconds(3600));
    } else if (key == "carry_half_life") {
      p.carry_half_life = parse_duration(label, value, seconds(60), seconds(86400L * 3650));
    } else if (key == "queues" && value == "none") {
      queues_given = true;
      p.queues.clear();
      p.queue_percentiles.clear();
    } else if (key == "queues") {
      queues_given = true;
      p.queues.clear();
      p.queue_percentiles.clear();
      const std::string_view given = value == "auto" ? "p50:p95" : value;
      const bool percentiles = !given.empty() && given.front() == 'p';
      std::size_t from = 0;
      while (from <= given.size()) {
        const auto to = std::min(given.find(':', from), given.size());
        const auto one = given.substr(from, to - from);
        if (percentiles != (!one.empty() && one.front() == 'p')) {
          throw InputError(
              fmt::format("priority parameter '{}': thresholds are either all durations or all "
                          "percentiles (p1-p99)",
                          item));
        }
        auto& list = percentiles ? p.queue_percentiles : p.queues;
        const double t =
            percentiles
                ? static_cast<double>(parse_uint(label, one.substr(1), 1, 99))
                : static_cast<double>(
                      parse_duration(label, one, seconds(1), seconds(86400L * 365 * 1000)).count());
        if (!list.empty() && t <= list.back()) {
          throw InputError(
              fmt::format("priority parameter '{}': queue thresholds must be ascending", item));
        }
        list.push_back(t);
        from = to + 1;
      }
      if (p.queues.size() > 100) {
        throw InputError(fmt::format("priority parameter '{}': at most 100 thresholds", item));
      }
      if (percentiles) {
        p.queues.assign(p.queue_percentiles.size(), std::numeric_limits<double>::infinity());
      }
    } else if (key == "starve") {
      starve_given = true;
      p.starve_factor = static_cast<double>(parse_uint(label, value, 0, 1000));
    } else if (key == "preempt_margin") {
      p.preempt_margin = static_cast<std::uint32_t>(parse_uint(label, value, 0, 2 * kMaxWeight));
    } else if (key == "reshape") {
      if (value != "yes" && value != "no") {
        throw InputError(fmt::format("{}: expected yes or no", item));
      }
      p.reshape = value == "yes";
    } else {
      throw InputError(fmt::format(
          "priority parameter '{}': unknown key '{}' (expected las_weight, age_weight, "
          "service_unit, levels, age_period, interval, carry_half_life, preempt_margin, queues, "
          "starve or reshape)",
          item, key));
    }
    if (std::uint64_t{p.las_weight} + p.age_weight > kMaxWeight) {
      throw InputError(fmt::format(
          "priority parameters: las_weight + age_weight = {} exceeds {} (Slurm priorities "
          "are 32-bit)",
          std::uint64_t{p.las_weight} + p.age_weight, kMaxWeight));
    }
  }
  // The defaults of PrioritySiteFactorParameters (PriorityParams' own are the continuous
  // LAS): discretized queues at the finished jobs' p50 and p95, starve=16.
  if (!queues_given) {
    p.queue_percentiles = {50, 95};
    p.queues.assign(2, std::numeric_limits<double>::infinity());
  }
  if (!starve_given) p.starve_factor = 16;
  return p;
}

bool FinishedJobs::add(const FinishedJob& job) {
  if (!ids_.insert(job.id).second) return false;
  jobs_.push_back(job);
  ++added_;
  ++per_user_[job.user];
  while (jobs_.front().end < job.end - kAdaptMaxAge) drop(jobs_.begin());
  if (jobs_.size() > kAdaptWindow) {
    std::uint32_t most = 0;
    for (const auto& [user, n] : per_user_) most = std::max(most, n);
    drop(std::find_if(jobs_.begin(), jobs_.end(),
                      [&](const FinishedJob& j) { return per_user_.at(j.user) == most; }));
  }
  return true;
}

void FinishedJobs::drop(std::deque<FinishedJob>::iterator it) {
  ids_.erase(it->id);
  const auto user = per_user_.find(it->user);
  if (--user->second == 0) per_user_.erase(user);
  jobs_.erase(it);
}

std::uint32_t FinishedJobs::jobs_of(std::uint32_t user) const {
  const auto it = per_user_.find(user);
  return it == per_user_.end() ? 0 : it->second;
}

std::vector<double> adapted_queues(const FinishedJobs& finished, const PriorityParams& p) {
  if (p.queue_percentiles.empty()) return p.queues;
  if (finished.size() < kAdaptMinJobs) {
    return std::vector<double>(p.queue_percentiles.size(), std::numeric_limits<double>::infinity());
  }
  std::vector<std::pair<double, double>> weighted;  // (service, weight)
  weighted.reserve(finished.size());
  for (const auto& j : finished.jobs()) {
    weighted.emplace_back(j.gpu_s, 1.0 / finished.jobs_of(j.user));
  }
  std::sort(weighted.begin(), weighted.end());
  const auto users = static_cast<double>(finished.users());
  std::vector<double> thresholds;
  for (const double pct : p.queue_percentiles) {
    // Nearest rank: the smallest service with at least pct% of the weight at or below
    // it (the tolerance absorbs the sums' rounding).
    const double target = pct / 100.0 * users * (1 - 1e-9);
    double below = 0;
    auto it = weighted.begin();
    for (; it + 1 != weighted.end(); ++it) {
      below += it->second;
      if (below >= target) break;
    }
    thresholds.push_back(std::max(it->first, 1.0));
  }
  return thresholds;
}

double PriorityParams::margin() const {
  return preempt_margin ? *preempt_margin : las_weight / 4.0;
}

double las_points(double attained_gpu_s, const PriorityParams& p) {
  const double level =
      std::log2(1.0 + std::max(attained_gpu_s, 0.0) / static_cast<double>(p.service_unit.count()));
  return p.las_weight * std::max(0.0, 1.0 - level / p.levels);
}

double age_points(double wait_s, const PriorityParams& p) {
  return p.age_weight * std::max(wait_s, 0.0) / static_cast<double>(p.age_period.count());
}

double priority_points(double attained_gpu_s, double wait_s, const PriorityParams& p) {
  return las_points(attained_gpu_s, p) + age_points(wait_s, p);
}

double PriorityParams::band() const {
  return std::floor(las_weight / static_cast<double>(queue_count()));
}

std::uint32_t service_queue(double attained_gpu_s, const PriorityParams& p) {
  return static_cast<std::uint32_t>(
      std::upper_bound(p.queues.begin(), p.queues.end(), attained_gpu_s) - p.queues.begin());
}

bool starving(double wait_s, double run_s, const PriorityParams& p) {
  return wait_s >= starving_after(run_s, p);
}

double starving_after(double run_s, const PriorityParams& p) {
  if (p.starve_factor <= 0 || run_s <= 0) return std::numeric_limits<double>::infinity();
  return p.starve_factor * run_s;
}

std::uint32_t pending_queue(double attained_gpu_s, double wait_s, std::uint32_t gpus,
                            const PriorityParams& p) {
  const double run_s = gpus > 0 ? attained_gpu_s / gpus : 0;
  return starving(wait_s, run_s, p) ? 0 : service_queue(attained_gpu_s, p);
}

std::uint32_t queue_of_points(double points, const PriorityParams& p) {
  const double band = std::max(p.band(), 1.0);
  const double from_top = std::floor(std::max(points, 0.0) / band);
  const double last = p.queue_count() - 1;
  return static_cast<std::uint32_t>(std::max(0.0, last - std::min(from_top, last)));
}

std::uint32_t site_factor(double attained_gpu_s, double wait_s, const PriorityParams& p,
                          std::uint32_t gpus) {
  if (p.discretized()) {
    const auto q = pending_queue(attained_gpu_s, wait_s, gpus, p);
    const double band = p.band();
    const double age = std::min(age_points(wait_s, p), std::max(band - 1, 0.0));
    return static_cast<std::uint32_t>(std::floor(band * (p.queue_count() - 1 - q) + age));
  }
  const double points = std::min(priority_points(attained_gpu_s, wait_s, p), 2e9);
  return static_cast<std::uint32_t>(std::lround(points));
}

double age_rate(const PriorityParams& p) {
  return p.age_weight / static_cast<double>(p.age_period.count());
}

double queue_key(double attained_gpu_s, double waiting_since_s, const PriorityParams& p) {
  return las_points(attained_gpu_s, p) - age_rate(p) * waiting_since_s;
}

}  // namespace dl
