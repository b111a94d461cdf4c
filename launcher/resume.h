// Where a (re)started job resumes from: the newest checkpoint in its checkpoint
// directory that verifies. The one place dlrun depends on the checkpoint format.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/deadline.h"

namespace dl {

struct ResumePoint {
  std::string path;   // the step directory
  std::int64_t step;  // its step
  WallClock::time_point written;
};

// nullopt when `ckpt_dir` holds no valid checkpoint (or does not exist yet).
std::optional<ResumePoint> newest_checkpoint(const std::string& ckpt_dir);

}  // namespace dl
