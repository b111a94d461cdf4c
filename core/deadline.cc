#include "core/deadline.h"

#include <algorithm>

namespace dl {

void SaveTimeEstimate::record(std::chrono::milliseconds measured) {
  measured_ = measured_ ? std::max(*measured_, measured) : measured;
}

std::optional<WallClock::time_point> deadline_checkpoint_time(
    std::optional<WallClock::time_point> end, std::chrono::milliseconds save,
    std::chrono::milliseconds margin, std::optional<WallClock::time_point> preempted_at) {
  if (!end) return std::nullopt;
  const WallClock::time_point when = *end - save - margin;
  if (preempted_at) return std::max(when, *preempted_at + kPreemptSignalWait);
  return when;
}

}  // namespace dl
