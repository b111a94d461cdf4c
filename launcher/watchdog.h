// The hang watchdog's decision (--dl-watchdog): rank 0 learns every rank's last reported
// step and when it changed, and declares the job hung when no watched rank has stepped for
// the watchdog's duration. The ranks at the lowest step stalled first (the others went on
// and now wait for them in a collective); among them, the one whose last step is oldest.
// Pure: dlrun's supervisor feeds it the PROGRESS messages and asks it on every tick.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dl {

struct RankStall {
  std::uint32_t rank = 0;
  std::int64_t step = -1;             // the last step it reported
  std::chrono::milliseconds idle{0};  // since that step changed
};

struct Hang {
  // The ranks at the lowest step, the one that stalled first at the front.
  std::vector<RankStall> stalled;
  // Every rank, by rank: its last step (-1: none reported, not watched) and idle time.
  std::vector<RankStall> ranks;
};

class Watchdog {
 public:
  using Steady = std::chrono::steady_clock;

  // `limit` > 0: how long the job may go without a step.
  Watchdog(std::chrono::milliseconds limit, std::uint32_t world_size);

  // A rank's program reported `step` (>= 0), reached at `when`. A rank is watched from
  // its first step on:
  // programs without the client API never report one, and start-up (loading, resuming,
  // joining the collectives) is not a step.
  void report(std::uint32_t rank, std::int64_t step, Steady::time_point when);
  // The rank is busy with something that is not a step (its part of a checkpoint round,
  // which has its own bound, --dl-grace): it counts as progress at `when`.
  void busy(std::uint32_t rank, Steady::time_point when);
  // The rank's program has exited: it no longer counts.
  void exited(std::uint32_t rank);

  // The hang, once every watched rank has been idle for the limit; nullopt otherwise (no
  // rank watched, or one has stepped within the limit).
  std::optional<Hang> check(Steady::time_point now) const;
  // When check() could first return a hang; nullopt while no rank is watched.
  std::optional<Steady::time_point> next_check() const;

 private:
  struct State {
    std::int64_t step = -1;
    Steady::time_point changed;
    bool exited = false;
    bool watched() const { return step >= 0 && !exited; }
  };
  std::chrono::milliseconds limit_;
  std::vector<State> ranks_;
};

// The evidence's opening section, for people: the verdict, then one line per rank.
// `nodes` by rank (empty strings where unknown).
std::string describe_hang(const Hang& hang, const std::vector<std::string>& nodes,
                          std::chrono::milliseconds limit);

}  // namespace dl

namespace dl {

// The collective libraries' own watchdogs must not fire before dlrun's: a peer that
// times out in its collective and aborts ends the run as a failure of a rank that was
// only waiting, before dlrun has named the rank that stalled and collected its stacks.
// Defaults (the user's own values win) for a job with --dl-watchdog=`watchdog`:
// DL_COLLECTIVE_TIMEOUT (seconds, for init_process_group(timeout=...)): longer than the
// watchdog plus the time to collect stacks and stop; TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC the
// same; TORCH_NCCL_ASYNC_ERROR_HANDLING and NCCL_ASYNC_ERROR_HANDLING (torch < 2.2) = 1,
// so that a collective that does time out ends the process instead of hanging it.
std::vector<std::pair<std::string, std::string>> collective_watchdog_defaults(
    std::chrono::seconds watchdog);
std::chrono::seconds collective_timeout_for(std::chrono::seconds watchdog);

}  // namespace dl
