#include "core/deadline.h"

#include <algorithm>

namespace dl {

void SaveTimeEstimate::record(std::chrono::milliseconds measured) {
  measured_ = measured_ ? std::max(*measured_, measured) : measured;
}

std::optional<WallClock::time_point> deadline_checkpoint_time(
    std::optional<WallClock::time_point> end, std::chrono::milliseconds save,
    std::chrono::milliseconds margin) {
  if (!end) return std::nullopt;
  return *end - save - margin;
}

}  // namespace dl
