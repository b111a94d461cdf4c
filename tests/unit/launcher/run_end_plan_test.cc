#include "launcher/run_end_plan.h"

#include <gtest/gtest.h>

#include "launcher/recovery.h"
#include "launcher/run_settings.h"

namespace dl {
namespace {

RunEndFacts facts(RunEnd end, int code = 0) {
  RunEndFacts f;
  f.end = end;
  f.code = code;
  f.why = "why";
  f.policy = RestartPolicy{3, 2};
  f.ckpt_at_start = 100;
  f.newest_ckpt = 200;  // the run made progress
  return f;
}

TEST(RunEndPlan, ACompletedRunForgetsTheHistoryAndEndsTheJob) {
  const RunEndPlan p = plan_run_end(facts(RunEnd::completed));
  EXPECT_EQ(p.history_action, HistoryAction::remove);
  EXPECT_FALSE(p.requeue);
  EXPECT_EQ(p.outcome.phase, JobPhase::completed);
  EXPECT_EQ(p.outcome.exit_code, 0);
  EXPECT_EQ(p.outcome.newest_ckpt, 200);
}

TEST(RunEndPlan, AStoppedRunIsRequeuedToResume) {
  const RunEndPlan p = plan_run_end(facts(RunEnd::stopped, kExitRequeued));
  EXPECT_TRUE(p.requeue);
  EXPECT_FALSE(p.hold);
  EXPECT_EQ(p.history_action, HistoryAction::write);
  EXPECT_EQ(p.history.stalled, 0u);
  EXPECT_EQ(p.history.ckpt, 200);
  EXPECT_EQ(p.outcome.exit_code, kExitRequeued);
  EXPECT_EQ(p.outcome.phase, JobPhase::requeued);
  EXPECT_EQ(p.outcome.detail, "why; requeued to resume from its checkpoint");
}

TEST(RunEndPlan, AJobThatCannotBeRequeuedStopsAndKeepsItsHistory) {
  RunEndFacts f = facts(RunEnd::stopped, kExitRequeued);
  f.requeue_blocker = "the job was cancelled";
  const RunEndPlan p = plan_run_end(f);
  EXPECT_FALSE(p.requeue);
  EXPECT_EQ(p.history_action, HistoryAction::keep);
  EXPECT_EQ(p.outcome.exit_code, kExitStopped);
  EXPECT_EQ(p.outcome.phase, JobPhase::stopped);
  EXPECT_EQ(p.outcome.detail, "why; not requeued: the job was cancelled");
  EXPECT_EQ(p.not_requeued, "the job was cancelled");
  // A failure that cannot be requeued is a failure, with the program's code.
  f.end = RunEnd::failed;
  f.code = 3;
  const RunEndPlan q = plan_run_end(f);
  EXPECT_EQ(q.outcome.phase, JobPhase::failed);
  EXPECT_EQ(q.outcome.exit_code, 3);
}

TEST(RunEndPlan, FailuresAreRestartedUntilNoneAreLeftThenHeld) {
  RunEndFacts f = facts(RunEnd::failed, 3);
  f.history.failures = 2;
  RunEndPlan p = plan_run_end(f);
  EXPECT_TRUE(p.requeue);
  EXPECT_FALSE(p.hold);
  EXPECT_EQ(p.history.failures, 3u);
  EXPECT_EQ(p.outcome.exit_code, 3);
  EXPECT_EQ(p.outcome.detail, "why; restart 3 of 3 after a failure");
  f.history.failures = 3;
  p = plan_run_end(f);
  EXPECT_TRUE(p.requeue);
  EXPECT_TRUE(p.hold);
  EXPECT_EQ(p.outcome.phase, JobPhase::held);
  EXPECT_EQ(p.outcome.detail, "why; no restarts left (4 failures, --dl-max-restarts=3)");
}

TEST(RunEndPlan, RunsWithoutProgressAreHeld) {
  RunEndFacts f = facts(RunEnd::stopped, kExitRequeued);
  f.newest_ckpt = 100;  // no newer checkpoint than the run started from
  f.history.stalled = 2;
  const RunEndPlan p = plan_run_end(f);
  EXPECT_TRUE(p.hold);
  EXPECT_EQ(p.outcome.detail, "why; no newer checkpoint in 3 runs in a row (still at step 100)");
}

TEST(RunEndPlan, InTheAllocationAFailureRestartsHereWithoutARequeue) {
  RunEndFacts f = facts(RunEnd::failed, 3);
  f.in_allocation = true;
  RunEndPlan p = plan_run_end(f);
  EXPECT_FALSE(p.requeue);
  EXPECT_TRUE(p.outcome.restart_here);
  EXPECT_EQ(p.outcome.exit_code, kExitRestartStep);
  EXPECT_EQ(p.outcome.phase, JobPhase::restarting);
  EXPECT_EQ(p.history_action, HistoryAction::write);
  // With no restarts left it is held like any job.
  f.history.failures = 3;
  p = plan_run_end(f);
  EXPECT_FALSE(p.outcome.restart_here);
  EXPECT_TRUE(p.hold);
}

TEST(RunEndPlan, ACulpritNodeIsExcludedAndNamedInTheStatus) {
  RunEndFacts f = facts(RunEnd::failed, 3);
  CulpritVerdict v;
  v.recent = {Culprit{"n1", 0, CulpritKind::failed}};
  v.exclude = "n2";
  v.why = "node n2 caused the last two failures; excluded";
  f.verdict = v;
  const RunEndPlan p = plan_run_end(f);
  EXPECT_EQ(p.exclude, "n2");
  EXPECT_EQ(p.history.culprits, v.recent);
  EXPECT_EQ(p.outcome.detail,
            "why; restart 1 of 3 after a failure; node n2 caused the last two failures; excluded");
  // Not for a run that was stopped.
  f.end = RunEnd::stopped;
  EXPECT_TRUE(plan_run_end(f).exclude.empty());
}

}  // namespace
}  // namespace dl
