// The restart guard: after a run of the job ends, whether to requeue it, hold it or let
// it end. Rank 0's dlrun decides; the history travels between runs of the same job in a
// small file (see launcher/restart_state).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dl {

// How a run ended, as rank 0's dlrun saw it.
enum class RunEnd {
  completed,  // every rank's program exited 0
  stopped,    // preempted, at its deadline or told to stop: checkpointed, to be requeued
  failed,     // a rank's program failed, or a rank was lost
};

struct RestartPolicy {
  std::uint32_t max_restarts = 3;          // restarts after failures (--dl-max-restarts)
  std::uint32_t max_stalled_restarts = 2;  // restarts in a row without a newer checkpoint
};

struct RestartHistory {
  std::uint32_t failures = 0;  // failed runs so far
  std::uint32_t stalled = 0;   // runs in a row that ended without a newer checkpoint
};

// "failures=1 stalled=0\n" and back; decode throws dl::InputError on anything else.
std::string encode_history(const RestartHistory& h);
RestartHistory decode_history(std::string_view text);

enum class RestartAction {
  finish,   // completed: nothing to do
  requeue,  // requeue the job (this array task only)
  hold,     // requeue it held: no restarts left, or it keeps stopping without progress
};

struct RestartDecision {
  RestartAction action = RestartAction::finish;
  RestartHistory history;  // what the next run starts from
  std::string reason;      // one line for the log and the job comment
};

// `ckpt_before`: the newest checkpoint's step when the run started; `ckpt_after`: now
// (nullopt: none). A run made progress when it left a newer checkpoint. A job is held
// when a failure is beyond `max_restarts`, or when its last `max_stalled_restarts`
// restarts, and the run before them, made none.
RestartDecision decide_restart(const RestartPolicy& policy, const RestartHistory& history,
                               RunEnd end, std::optional<std::int64_t> ckpt_before,
                               std::optional<std::int64_t> ckpt_after);

}  // namespace dl
