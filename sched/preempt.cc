#include "sched/preempt.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/parse.h"

namespace dl {

using std::chrono::seconds;

double seconds_since_checkpoint(double run_s, std::optional<double> ckpt_every_s) {
  run_s = std::max(run_s, 0.0);
  if (!ckpt_every_s || *ckpt_every_s <= 0) return run_s;
  return std::fmod(run_s, *ckpt_every_s);
}

bool just_checkpointed(double progress_s, std::optional<double> ckpt_every_s, double slack_s) {
  if (!ckpt_every_s || *ckpt_every_s <= 0) return true;
  if (progress_s + 1e-6 < *ckpt_every_s) return false;
  const double since = std::fmod(progress_s + 1e-6, *ckpt_every_s) - 1e-6;
  return since <= slack_s;
}

double checkpointed_progress(double whole_run_s) { return std::max(0.0, whole_run_s - 2.0); }

std::vector<VictimCandidate> victim_order(std::vector<VictimCandidate> candidates) {
  candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                  [](const VictimCandidate& c) { return !c.preemptible; }),
                   candidates.end());
  std::sort(candidates.begin(), candidates.end(),
            [](const VictimCandidate& a, const VictimCandidate& b) {
              if (a.lost_gpu_s() != b.lost_gpu_s()) return a.lost_gpu_s() < b.lost_gpu_s();
              if (a.gpus != b.gpus) return a.gpus < b.gpus;
              return a.id > b.id;
            });
  return candidates;
}

std::uint16_t victim_rank(double lost_gpu_s) {
  const double r = std::round(2048.0 * std::log2(1.0 + std::max(lost_gpu_s, 0.0)));
  return static_cast<std::uint16_t>(std::min(r, 65535.0));
}

std::vector<VictimCandidate> choose_victims(std::vector<VictimCandidate> candidates,
                                            VictimTrial& trial) {
  std::vector<VictimCandidate> chosen;
  for (const auto& c : victim_order(std::move(candidates))) {
    trial.release(c);
    chosen.push_back(c);
    if (trial.preemptor_fits()) break;
  }
  if (chosen.empty() || !trial.preemptor_fits()) {
    for (const auto& c : chosen) trial.take_back(c);
    return {};
  }
  // The last victim was needed (the preemptor did not fit before it); any earlier one
  // may have freed GPUs where the preemptor does not go.
  for (std::size_t i = chosen.size() - 1; i-- > 0;) {
    trial.take_back(chosen[i]);
    if (trial.preemptor_fits()) {
      chosen.erase(chosen.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      trial.release(chosen[i]);
    }
  }
  return chosen;
}

bool outranks(double preemptor_points, double victim_points, const PriorityParams& p) {
  if (p.discretized()) {
    return queue_of_points(preemptor_points, p) < queue_of_points(victim_points, p);
  }
  return preemptor_points >= victim_points + p.margin();
}

std::optional<bool> partitions_decide(const PreemptPair& pair) {
  if (pair.victim_mode_off) return false;
  if (pair.victim_tier != pair.preemptor_tier) return pair.victim_tier < pair.preemptor_tier;
  return std::nullopt;
}

bool may_preempt(const PreemptPair& pair, const PriorityParams& p) {
  if (const auto decided = partitions_decide(pair)) return *decided;
  return pair.victim_dl_preemptible && pair.dl_priority &&
         outranks(pair.preemptor_points, pair.victim_points, p) &&
         (!p.discretized() || just_checkpointed(pair.victim_progress_s, pair.victim_ckpt_every_s,
                                                2.0 * static_cast<double>(p.interval.count())));
}

seconds warn_time(seconds grace) {
  const seconds warn = grace + seconds(30);
  if (warn > seconds(65535)) {
    throw InputError(fmt::format(
        "--dl-grace={}: a preemptible job's grace must be at most 65505s (Slurm's --signal "
        "time is at most 65535s and slurm-dl adds 30s)",
        format_duration(grace)));
  }
  return warn;
}

std::optional<seconds> backfill_time_min(seconds grace, std::optional<seconds> limit) {
  const auto raw = 4 * warn_time(grace);
  const seconds minutes((raw.count() + 59) / 60 * 60);
  if (limit && minutes >= *limit) return std::nullopt;
  return minutes;
}

}  // namespace dl
