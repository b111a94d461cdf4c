// The checkpoint-step agreement: all ranks checkpoint at the same step.
//
// Rank 0's dlrun runs one round per checkpoint request:
//   1. PREPARE: every dlrun raises the request in its program's shared page. At its next
//      report_step(s) the program stops and waits ("frozen at s"): it cannot pass a step
//      whose checkpoint it does not know about.
//   2. Every dlrun answers with its program's last step and whether it is frozen there.
//      A program busy in a long step (or blocked in a collective with a frozen peer) is
//      answered for after a short wait, unfrozen.
//   3. TARGET: rank 0 picks the step (agree_on_step) and every dlrun publishes it. Each
//      program checkpoints at the first step it reports that is >= the target. Ranks
//      report the same sequence of steps, so that is the same step everywhere.
//   4. DONE: every dlrun reports when its program called checkpoint_done(step >= target)
//      or exited; the round is complete when all have.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace dl {

// A rank's step when its program has not loaded a client API (dl/client.h, slurm_dl):
// it will never report a step or a checkpoint.
inline constexpr std::int64_t kNoClientApi = -2;

struct StepReport {
  bool frozen = false;     // the program waits at `step` for the target
  std::int64_t step = -1;  // its last reported step; -1: none yet; kNoClientApi
};

// The smallest step no rank can have passed without knowing the target: a frozen rank
// stays at its step, a running one reaches at least step + 1. -1 when no rank uses the
// client API.
std::int64_t agree_on_step(const std::vector<StepReport>& reports);

// How long a rank's dlrun waits, in a round, for its program to stop at its next
// report_step before it answers for it as running. Waiting longer gains nothing: a
// program running at step s stops at s + 1 at the latest (the request is raised in its
// page), which is also what a running answer bounds it by; and a rank whose program is
// blocked in a collective with a peer that stopped cannot stop before it is answered for,
// so every rank stalls this long. It was 500 ms: one round in five on a loaded machine
// stalled every rank for half a second. Long enough for every write the program made
// before the request to be seen.
inline constexpr std::chrono::milliseconds kFreezeWait{20};

// Whether a rank's dlrun answers the round now: its program stopped (`frozen`), or
// reports no steps (`step` < 0: none yet, or kNoClientApi), or `waited` kFreezeWait.
bool answer_round_now(bool frozen, std::int64_t step, std::chrono::steady_clock::duration waited);

// When the next periodic round (--dl-ckpt-every) starts, after a round (of any kind) has
// ended at `ended`, in a run that started at `origin`: the first point of the run's grid
// (origin + k x every, where preempt/dl expects a job's checkpoints: k x --dl-ckpt-every
// of run time) at least half an interval after it ended. So checkpoints come every
// `every` whatever a round takes (scheduling from its end would stretch every interval by
// the round's time, and with it the work a failure loses on average), a round slower
// than half the interval, a round of another kind or a restore longer than the interval
// moves the next one to a later point of the grid, never off it, and the program trains
// at least half an interval between rounds.
std::chrono::steady_clock::time_point next_periodic_round(
    std::chrono::steady_clock::time_point origin, std::chrono::steady_clock::time_point ended,
    std::chrono::steady_clock::duration every);

// Rank 0's bookkeeping for one round.
class CheckpointRound {
 public:
  CheckpointRound(std::uint64_t seq, std::uint32_t world_size, bool stop);

  std::uint64_t seq() const { return seq_; }
  // Whether the run ends after this checkpoint (preemption, deadline, a stop signal);
  // a periodic round becomes one when a stop request arrives during it.
  bool stop() const { return stop_; }
  void make_stop() { stop_ = true; }

  // Phase 2. Later reports of the same rank are ignored.
  void report(std::uint32_t rank, StepReport r);
  bool reports_complete() const;
  // Valid once reports_complete().
  std::int64_t target() const;
  // Valid once reports_complete(): no rank's program can checkpoint (none loaded a
  // client API, or it exited).
  bool no_client_api() const;

  // Phase 4. A rank whose program exited counts as reported and done.
  void done(std::uint32_t rank);
  void exited(std::uint32_t rank);
  // Whether `rank`'s program, exiting with `code` (ask before exited(rank)), failed to
  // write the checkpoint that this round ends the run with: the round stops the run, the
  // program loaded a client API (so it can checkpoint and say so), had not said its
  // checkpoint was done, and exited non-zero other than by `stop_signal` (SIGTERM under
  // --ckpt-signal=TERM, where it is how the program stops; 0: none). Such a run failed,
  // and its restart counts against --dl-max-restarts: it has no checkpoint to resume.
  bool failed_to_checkpoint(std::uint32_t rank, int code, int stop_signal) const;
  bool complete() const;
  std::uint32_t outstanding() const;

 private:
  std::uint64_t seq_;
  bool stop_;
  std::vector<bool> reported_;
  std::vector<StepReport> reports_;
  std::vector<bool> done_;
};

}  // namespace dl
