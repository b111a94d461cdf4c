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

// end - save - margin: when to start the deadline checkpoint. nullopt when the job has
// no end time (no time limit).
std::optional<WallClock::time_point> deadline_checkpoint_time(
    std::optional<WallClock::time_point> end, std::chrono::milliseconds save,
    std::chrono::milliseconds margin);

}  // namespace dl
