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
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

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
  // The half-life of the service a finished job leaves to the jobs that continue its
  // work (site_factor/dl only; see sched/ledger.h), as Slurm's PriorityDecayHalfLife.
  std::chrono::seconds carry_half_life{7 * 86400};
  // How many more points a pending job needs than a running preemptible DL job of the
  // same PriorityTier to preempt it (preempt/dl, dl-sim). Unset: las_weight / 4 (five
  // levels at the defaults: a brand-new job preempts a job that has had 31 GPU-hours
  // more service), so jobs do not take turns preempting each other at every step.
  std::optional<std::uint32_t> preempt_margin;

  // Discretized least attained service (as Tiresias, NSDI'19), when `queues` holds
  // thresholds (GPU-seconds, ascending): a job with attained service A is in queue k,
  // the number of thresholds <= A; queue 0 first, jobs within a queue by how long
  // they have waited (FIFO). A job that has waited starve_factor times its run time
  // (A / its GPUs) is promoted to queue 0 (0: never). A pending job may preempt a
  // running preemptible job of the same tier only when it is in a lower queue: the
  // victim has crossed a threshold the preemptor has not. Empty: the continuous LAS
  // above, with the margin.
  std::vector<double> queues;
  // queues=p50:p95 (or queues=auto, which means that): the thresholds are these
  // percentiles (ascending, 1-99) of the service of the cluster's recently finished
  // jobs (adapted_queues), so that they follow its own job sizes. Empty: `queues` as
  // given. Until kAdaptMinJobs have finished, `queues` holds infinities (one queue).
  std::vector<double> queue_percentiles;
  double starve_factor = 0;
  // site_factor/dl: a pending even gang (--dl-placement=even, one task per GPU, no -N)
  // whose split cannot start now takes another even split that can (dl-sim --shapes
  // even-reshaped); "reshape=yes".
  bool reshape = false;

  double margin() const;
  bool discretized() const { return !queues.empty(); }
  std::uint32_t queue_count() const { return static_cast<std::uint32_t>(queues.size()) + 1; }
  // The site-factor points of one queue (las_weight / queue_count(), whole points).
  double band() const;
};

// queues=pNN: how many finished jobs the thresholds follow (the most recent, none more
// than kAdaptMaxAge seconds older than the newest), and how many must have finished
// before there are thresholds.
inline constexpr std::size_t kAdaptWindow = 1000;
inline constexpr std::int64_t kAdaptMaxAge = 14 * 86400;
inline constexpr std::size_t kAdaptMinJobs = 10;

// A job that finished after running on GPUs, as queues=pNN counts it.
struct FinishedJob {
  std::uint32_t id = 0;
  std::uint32_t user = 0;
  double gpu_s = 0;      // its service: all its runs and what it carried in
  std::int64_t end = 0;  // when it was seen finished (seconds, never decreasing)
};

// The finished jobs queues=pNN takes its thresholds from, oldest first. A user cannot
// crowd the others out: when the window is full, the job dropped is the oldest of the
// user who has the most jobs in it, so one user's many jobs push out another user's
// only while that user has more; and adapted_queues weighs each user's jobs together as
// one user.
class FinishedJobs {
 public:
  // Adds the job, unless it is there already (false): slurmctld shows a finished job
  // at every sample until it purges it. Then drops the jobs older than kAdaptMaxAge
  // before it, and one job if the window holds more than kAdaptWindow.
  bool add(const FinishedJob& job);
  const std::deque<FinishedJob>& jobs() const { return jobs_; }
  std::size_t size() const { return jobs_.size(); }
  std::size_t users() const { return per_user_.size(); }
  std::uint32_t jobs_of(std::uint32_t user) const;
  // How many jobs add has taken: the window is the same while this is.
  std::uint64_t added() const { return added_; }

 private:
  void drop(std::deque<FinishedJob>::iterator it);
  std::deque<FinishedJob> jobs_;
  std::unordered_set<std::uint32_t> ids_;
  std::unordered_map<std::uint32_t, std::uint32_t> per_user_;
  std::uint64_t added_ = 0;
};

// The thresholds for `p`: p.queues when they are fixed; with queue_percentiles, those
// percentiles (nearest rank) of the finished jobs' service, each user's jobs weighing
// 1 / (that user's jobs in the window), so that every user weighs the same however many
// jobs they run; each at least 1 GPU-second; infinities while fewer than kAdaptMinJobs
// have finished.
std::vector<double> adapted_queues(const FinishedJobs& finished, const PriorityParams& p);

// Parses PrioritySiteFactorParameters / dl-sim --priority-params: comma-separated
// key=value with the keys las_weight, age_weight, service_unit, levels, age_period,
// interval, carry_half_life, preempt_margin (durations as "30s", "1h", "2d"), queues (thresholds in
// GPU-time separated by ':', ascending, e.g. "queues=1h:8h" for 1 and 8 GPU-hours; or
// percentiles of finished jobs' service, "queues=p50:p95", of which "queues=auto" is short;
// "queues=none": the continuous LAS), starve (a whole factor) and reshape (yes or no).
// Keys not given take PriorityParams' defaults, except queues (auto) and starve (16): an
// empty string gives the discretized queues at the finished jobs' p50 and p95.
// Throws InputError naming the key and what is allowed; las_weight + age_weight must
// not exceed 1,000,000,000 so that the factor stays inside Slurm's 32-bit priority.
PriorityParams parse_priority_params(std::string_view text);

double las_points(double attained_gpu_s, const PriorityParams& p);
double age_points(double wait_s, const PriorityParams& p);

// las + age. The job_submit/site_factor plugins round it to whole points.
double priority_points(double attained_gpu_s, double wait_s, const PriorityParams& p);

// The value site_factor/dl gives Slurm (site factor, before Slurm's NICE_OFFSET),
// capped at 2,000,000,000 (a job would have to wait ~50 years at the defaults).
// With discretized queues: band() x (queue_count() - 1 - queue) plus the age points,
// capped below one band so that waiting orders jobs only within their queue. `gpus`:
// the job's GPUs (for the starvation guard's run time; 0 when unknown).
std::uint32_t site_factor(double attained_gpu_s, double wait_s, const PriorityParams& p,
                          std::uint32_t gpus = 0);

// Discretized queues. The queue of a job that has had `attained_gpu_s` of service.
std::uint32_t service_queue(double attained_gpu_s, const PriorityParams& p);
// Whether the starvation guard promotes a job that has waited `wait_s` and run `run_s`
// seconds (over its whole life) to queue 0.
bool starving(double wait_s, double run_s, const PriorityParams& p);
// The queue a pending job is served from: 0 when starving, else its service queue.
std::uint32_t pending_queue(double attained_gpu_s, double wait_s, std::uint32_t gpus,
                            const PriorityParams& p);
// When (in seconds of waiting, counted over its life) a job that has run `run_s`
// seconds starts starving; infinity when the guard is off or the job never ran.
double starving_after(double run_s, const PriorityParams& p);
// The queue that site-factor points stand for (their band).
std::uint32_t queue_of_points(double points, const PriorityParams& p);

// For schedulers that keep pending jobs sorted instead of rescoring them: a pending
// job that had waited W before it became eligible again at time E has, at `now`,
// priority queue_key(A, E - W) + age_rate() * now, so pending jobs sorted by
// queue_key stay sorted while they wait.
double age_rate(const PriorityParams& p);
double queue_key(double attained_gpu_s, double waiting_since_s, const PriorityParams& p);

}  // namespace dl
