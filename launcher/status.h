// The status line dlrun keeps in the job comment (see contracts.md), e.g.
//   dl: 16 GPUs as 2x8, preemptible | RUNNING step 1200, ckpt 1100 (2m ago)
// The part before " | " belongs to whoever wrote it (job_submit/dl) and is kept as
// dlrun found it when it started.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "launcher/gpu_usage.h"

namespace dl {

enum class JobPhase {
  running,
  checkpointing,
  restarting,  // a failed step is started again inside the allocation
  requeued,
  held,
  completed,
  failed,
  stopped
};

// The experiment-tracking event (exp/trial.h) for a run ending in `phase`:
// "completed", "restarting", "requeued", "held", "failed", "stopped"; "stop_requested" for
// checkpointing, "run_started" for running.
const char* tracking_event(JobPhase phase);

struct Status {
  JobPhase phase = JobPhase::running;
  std::optional<std::int64_t> step;              // rank 0's last reported step
  std::optional<std::int64_t> ckpt_step;         // the newest checkpoint
  std::optional<std::chrono::seconds> ckpt_age;  // how long ago it was written
  std::optional<GpuFigures> gpu;                 // what the job's GPUs do
  // DL_RESTART_COUNT when not 0: requeues and restarts inside this allocation.
  std::optional<std::uint32_t> restarts;
  std::string metrics;                       // "loss=0.31 acc=0.9"
  std::optional<std::int64_t> metrics_step;  // the step they belong to
  std::string detail;                        // why: for requeued, held, failed
};

// "RUNNING step 1200, ckpt 1100 (2m ago), gpu 85% (avg 80%) 12.0/80.0 GiB, restarts 2,
// loss=0.31"; a detail follows after ": ".
std::string format_status(const Status& s);

// "45s", "2m", "3h", "2d": the largest whole unit, as in the contract's "(2m ago)".
std::string format_age(std::chrono::seconds age);
// And back: nullopt when `text` is not a number and one of those units.
std::optional<std::chrono::seconds> parse_age(std::string_view text);

// The part of a job comment before the first " | " (all of it when there is none).
std::string comment_prefix(std::string_view comment);

// prefix + " | " + status; "dl | " + status when the prefix is empty, so that the next
// run finds the separator again.
std::string merge_comment(std::string_view prefix, std::string_view status);

// At most one ordinary update per interval (each one is an RPC to slurmctld); urgent
// ones (a phase change) go through at once. Identical texts are never sent twice.
class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RateLimiter(std::chrono::milliseconds interval) : interval_(interval) {}
  bool allow(Clock::time_point now, const std::string& text, bool urgent);

 private:
  std::chrono::milliseconds interval_;
  std::optional<Clock::time_point> last_;
  std::string last_text_;
};

}  // namespace dl
