#include "launcher/run_end_plan.h"

#include <fmt/format.h>

#include "launcher/recovery.h"
#include "launcher/run_settings.h"

namespace dl {

RunEndPlan plan_run_end(const RunEndFacts& f) {
  RunEndPlan p;
  p.outcome.exit_code = f.code;
  p.outcome.newest_ckpt = f.newest_ckpt;
  RestartDecision d = decide_restart(f.policy, f.history, f.end, f.ckpt_at_start, f.newest_ckpt);
  p.reason = d.reason;
  // A node that caused the job's last failures: after the reason in the status line.
  std::string culprit_note;
  if (f.verdict && f.end == RunEnd::failed) {
    d.history.culprits = f.verdict->recent;
    if (f.verdict->exclude) {
      p.exclude = *f.verdict->exclude;
      culprit_note = "; " + f.verdict->why;
    }
  }
  p.history = d.history;
  switch (d.action) {
    case RestartAction::finish:
      p.history_action = HistoryAction::remove;
      p.outcome.phase = JobPhase::completed;
      return p;
    case RestartAction::requeue:
      if (f.in_allocation && f.end == RunEnd::failed) {
        p.history_action = HistoryAction::write;
        p.outcome.phase = JobPhase::restarting;
        p.outcome.detail = fmt::format("{}; {}{}", f.why, d.reason, culprit_note);
        p.outcome.restart_here = true;
        p.outcome.exit_code = kExitRestartStep;
        return p;
      }
      break;
    case RestartAction::hold: break;
  }
  const bool blocked = !f.requeue_blocker.empty();
  if (f.end == RunEnd::stopped) p.outcome.exit_code = blocked ? kExitStopped : kExitRequeued;
  if (blocked) {
    p.not_requeued = f.requeue_blocker;
    p.outcome.phase = f.end == RunEnd::failed ? JobPhase::failed : JobPhase::stopped;
    p.outcome.detail = fmt::format("{}; not requeued: {}", f.why, f.requeue_blocker);
    return p;
  }
  p.history_action = HistoryAction::write;
  p.requeue = true;
  p.hold = d.action == RestartAction::hold;
  p.outcome.phase = p.hold ? JobPhase::held : JobPhase::requeued;
  p.outcome.detail = fmt::format("{}; {}{}", f.why, d.reason, culprit_note);
  return p;
}

}  // namespace dl
