// The DL priority: least attained GPU service first, with aging so nothing starves.
// It needs no run-time estimate from users (in the spirit of Tiresias' 2D-LAS: the
// "2D" service is GPUs x time, counted over every run of a job, across requeues).
//
//   level(A) = log2(1 + A / service_unit)       A: attained GPU-seconds
//   las      = las_weight * max(0, 1 - level / levels)
//   age      = age_weight * W / age_period        W: seconds waited (eligible, pending)
//   priority = las + age
//
// Both A and W are counted over the job's whole life, across requeues. A job that
// has had no service gets the full las_weight; every doubling of its service (in
// units of service_unit GPU-seconds) costs las_weight / levels. A pending job gains
// age_weight every age_period, without a cap: with age_weight >= las_weight, a job
// that has waited age_period outranks every job that arrives after that, so its wait
// is bounded (no starvation, even under overload). A running job keeps the age it
// has earned, so a job that has been preempted and has waited again and again
// becomes harder to preempt (it cannot be preempted forever). Because every pending
// job ages at the same rate, their order only changes when one of them gets service.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dl {

struct PriorityParams {
  std::uint32_t las_weight = 100000;
  std::uint32_t age_weight = 100000;
  std::chrono::seconds service_unit{3600};  // GPU-seconds per level step: 1 GPU-hour
  std::uint32_t levels = 20;
  std::chrono::seconds age_period{3 * 86400};
  // How often the controller samples service and refreshes the priorities of
  // pending jobs (site_factor/dl only).
  std::chrono::seconds interval{30};
  // How many more points a pending job needs than a running preemptible DL job of the
  // same PriorityTier to preempt it (preempt/dl, dl-sim). Unset: las_weight / 4 (five
  // levels at the defaults: a brand-new job preempts a job that has had 31 GPU-hours
  // more service), so jobs do not take turns preempting each other at every step.
  std::optional<std::uint32_t> preempt_margin;

  double margin() const;
};

// Parses PrioritySiteFactorParameters / dl-sim --priority-params: comma-separated
// key=value with the keys las_weight, age_weight, service_unit, levels, age_period,
// interval, preempt_margin (durations as "30s", "1h", "2d"). An empty string gives the
// defaults.
// Throws InputError naming the key and what is allowed; las_weight + age_weight must
// not exceed 1,000,000,000 so that the factor stays inside Slurm's 32-bit priority.
PriorityParams parse_priority_params(std::string_view text);

double las_points(double attained_gpu_s, const PriorityParams& p);
double age_points(double wait_s, const PriorityParams& p);

// las + age. The job_submit/site_factor plugins round it to whole points.
double priority_points(double attained_gpu_s, double wait_s, const PriorityParams& p);

// The value site_factor/dl gives Slurm (site factor, before Slurm's NICE_OFFSET),
// capped at 2,000,000,000 (a job would have to wait ~50 years at the defaults).
std::uint32_t site_factor(double attained_gpu_s, double wait_s, const PriorityParams& p);

// For schedulers that keep pending jobs sorted instead of rescoring them: a pending
// job that had waited W before it became eligible again at time E has, at `now`,
// priority queue_key(A, E - W) + age_rate() * now, so pending jobs sorted by
// queue_key stay sorted while they wait.
double age_rate(const PriorityParams& p);
double queue_key(double attained_gpu_s, double waiting_since_s, const PriorityParams& p);

}  // namespace dl
