// The deadline checkpoint: dlrun knows when Slurm will end the job and starts the last
// checkpoint early enough to be durable by then, so no warning signal is needed.
#pragma once

#include <chrono>
#include <optional>

namespace dl {

using WallClock = std::chrono::system_clock;

// How long a checkpoint takes: the user's --dl-grace until one has been measured, then
// the longest one measured in this run (saves rarely get faster as training goes on).
class SaveTimeEstimate {
 public:
  explicit SaveTimeEstimate(std::chrono::milliseconds declared) : declared_(declared) {}
  void record(std::chrono::milliseconds measured);
  std::chrono::milliseconds value() const { return measured_ ? *measured_ : declared_; }

 private:
  std::chrono::milliseconds declared_;
  std::optional<std::chrono::milliseconds> measured_;
};

// How long the deadline checkpoint of a job that Slurm is preempting leaves to the
// preemption's own signal: slurmctld moves the job's end time and signals it in one
// decision, but the signal reaches the tasks a moment later, and dlrun says "preempted"
// only when it answers the signal.
inline constexpr std::chrono::seconds kPreemptSignalWait{10};

// end - save - margin: when to start the deadline checkpoint; for a job being preempted
// since `preempted_at`, no earlier than kPreemptSignalWait after that. nullopt when the
// job has no end time (no time limit).
std::optional<WallClock::time_point> deadline_checkpoint_time(
    std::optional<WallClock::time_point> end, std::chrono::milliseconds save,
    std::chrono::milliseconds margin,
    std::optional<WallClock::time_point> preempted_at = std::nullopt);

}  // namespace dl
