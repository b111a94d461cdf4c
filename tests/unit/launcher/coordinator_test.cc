#include "launcher/coordinator.h"

#include <gtest/gtest.h>

#include <csignal>
#include <stdexcept>

#include "core/drain.h"
#include "launcher/recovery.h"

namespace dl {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

const Steady::time_point t0{};

// Slurm, the launcher and tracking as the coordinator sees them, with a clock of its own.
class FakeJobControl final : public JobControl {
 public:
  WallClock::time_point wall = WallClock::time_point{} + 1000h;
  ProgramProgress program;
  slurm::JobInfo job;
  bool job_readable = true;
  std::vector<std::string> comments;
  std::vector<RunEnding> concluded;
  RunOutcome outcome;  // what conclude_run returns
  std::vector<Culprit> judged;
  std::vector<Culprit> reported_culprits;
  std::vector<std::string> reported_lost;
  std::vector<int> reported_ends;
  std::vector<std::pair<std::string, std::string>> events;
  std::vector<std::int64_t> checkpoints;
  std::vector<RunRecord> records;

  WallClock::time_point wall_now() override { return wall; }
  ProgramProgress progress() override { return program; }
  slurm::JobInfo load_job(const slurm::JobRef&) override {
    if (!job_readable) throw std::runtime_error("slurmctld does not answer");
    return job;
  }
  bool set_comment(const slurm::JobRef&, const std::string& comment) override {
    comments.push_back(comment);
    return true;
  }
  bool status_comments() override { return true; }
  RunOutcome conclude_run(const RunEnding& ending, const ShowStatus&) override {
    concluded.push_back(ending);
    return outcome;
  }
  CulpritVerdict judge_culprit(const std::optional<Culprit>& culprit) override {
    if (culprit) judged.push_back(*culprit);
    return {};
  }
  void report_culprit(const Culprit& c) override { reported_culprits.push_back(c); }
  void report_lost_node(const std::string& node) override { reported_lost.push_back(node); }
  void report_run_end(int code) override { reported_ends.push_back(code); }
  void record_event(const std::string& kind, const std::string& reason) override {
    events.emplace_back(kind, reason);
  }
  void record_checkpoint(std::int64_t step) override { checkpoints.push_back(step); }
  void record_metrics(std::int64_t, const std::vector<std::pair<std::string, double>>&) override {}
  void record_logs(const std::vector<std::string>&) override {}
  void save_run_record(const RunRecord& r) override { records.push_back(r); }
};

Message msg(MsgKind kind, std::uint64_t seq = 0, std::int64_t step = -1, bool flag = false,
            int code = 0, std::string text = {}) {
  Message m;
  m.kind = kind;
  m.seq = seq;
  m.step = step;
  m.flag = flag;
  m.code = code;
  m.text = std::move(text);
  return m;
}

struct Harness {
  explicit Harness(std::uint32_t ranks = 2, std::optional<Coordinator::Resumed> resumed = {}) {
    job.ckpt_dir = "/ckpt/job";
    job.grace = 60s;
    job.job = slurm::JobRef{4711, {}, {}};
    control.job.comment = "dl: gpus=2";
    control.outcome.exit_code = kExitRequeued;
    control.outcome.phase = JobPhase::requeued;
    coordinator.emplace(options, job, ranks, resumed, control,
                        [this](const Message& m) { sent.push_back(m); });
    coordinator->set_send_to(
        [this](std::uint32_t rank, const Message& m) { sent_to.emplace_back(rank, m); });
    for (std::uint32_t r = 0; r < ranks; ++r) coordinator->set_node(r, "n" + std::to_string(r));
  }
  void start() { coordinator->start(t0); }
  // A stop ("preempted") at t0 whose round finds both ranks frozen at `step`; its seq.
  std::uint64_t stop_frozen_at(std::int64_t step) {
    coordinator->on_message(0, msg(MsgKind::want, 0, -1, true, 0, "preempted"), t0);
    const std::uint64_t seq = sent.back().seq;
    coordinator->on_message(0, msg(MsgKind::step, seq, step, true), t0);
    coordinator->on_message(1, msg(MsgKind::step, seq, step, true), t0);
    return seq;
  }
  // The kinds of the messages broadcast so far.
  std::vector<MsgKind> kinds() const {
    std::vector<MsgKind> k;
    for (const auto& m : sent) k.push_back(m.kind);
    return k;
  }

  SupervisorOptions options;
  JobSettings job;
  FakeJobControl control;
  std::vector<Message> sent;
  std::vector<std::pair<std::uint32_t, Message>> sent_to;
  std::optional<Coordinator> coordinator;
};

TEST(Coordinator, AStopRunsOneRoundThenConcludesTheRunAsStopped) {
  Harness h(2, Coordinator::Resumed{10, WallClock::time_point{}});
  h.start();
  h.coordinator->on_message(0, msg(MsgKind::want, 0, -1, true, 0, "preempted"), t0 + 1s);
  ASSERT_EQ(h.kinds(), std::vector<MsgKind>{MsgKind::prepare});
  const std::uint64_t seq = h.sent[0].seq;
  h.coordinator->on_message(0, msg(MsgKind::step, seq, 41, true), t0 + 1s);
  EXPECT_EQ(h.sent.size(), 1u);  // rank 1 has not reported yet
  h.coordinator->on_message(1, msg(MsgKind::step, seq, 42, false), t0 + 1s);
  ASSERT_EQ(h.sent.size(), 2u);
  EXPECT_EQ(h.sent[1].kind, MsgKind::target);
  EXPECT_EQ(h.sent[1].step, 43);  // rank 1 runs on to at least 43
  EXPECT_TRUE(h.sent[1].flag);
  h.coordinator->on_message(0, msg(MsgKind::done, seq, 43), t0 + 3s);
  EXPECT_TRUE(h.control.concluded.empty());
  h.coordinator->on_message(1, msg(MsgKind::done, seq, 43), t0 + 3s);
  ASSERT_EQ(h.control.concluded.size(), 1u);
  const auto& c = h.control.concluded[0];
  EXPECT_EQ(c.end, RunEnd::stopped);
  EXPECT_EQ(c.code, kExitRequeued);
  EXPECT_EQ(c.why, "preempted");
  EXPECT_EQ(c.ckpt_at_start, 10);
  EXPECT_FALSE(c.verdict);
  // Every rank ends with the outcome's code.
  ASSERT_EQ(h.sent.back().kind, MsgKind::end);
  EXPECT_EQ(h.sent.back().code, kExitRequeued);
  EXPECT_TRUE(h.control.reported_ends.empty());  // no job-level launcher
  // A second stop request changes nothing: the run has ended.
  h.coordinator->on_message(0, msg(MsgKind::want, 0, -1, true, 0, "again"), t0 + 4s);
  EXPECT_EQ(h.control.concluded.size(), 1u);
}

TEST(Coordinator, UnderTheLauncherAStopTellsTheLauncherItsExitCodeBeforeTheRanksEnd) {
  Harness h;
  h.job.under_launcher = true;
  h.control.outcome.exit_code = 143;
  h.control.outcome.phase = JobPhase::stopped;
  std::vector<int> reported_at_end{-1};
  h.coordinator.reset();
  h.coordinator.emplace(h.options, h.job, 2, std::nullopt, h.control,
                        [&h, &reported_at_end](const Message& m) {
                          h.sent.push_back(m);
                          if (m.kind == MsgKind::end) reported_at_end = h.control.reported_ends;
                        });
  h.start();
  const std::uint64_t seq = h.stop_frozen_at(7);
  h.coordinator->on_message(0, msg(MsgKind::done, seq, 7), t0 + 1s);
  h.coordinator->on_message(1, msg(MsgKind::done, seq, 7), t0 + 1s);
  ASSERT_EQ(h.sent.back().kind, MsgKind::end);
  EXPECT_EQ(h.sent.back().code, 143);
  // The launcher knows before any rank ends: a program that outlives its peers and fails
  // the step (an MPI abort) does not turn the stop into a failure.
  EXPECT_EQ(reported_at_end, std::vector<int>{143});
}

TEST(Coordinator, ARankThatDoesNotCheckpointWithinTheGraceTimeEndsTheRunStopped) {
  Harness h;
  h.start();
  const std::uint64_t seq = h.stop_frozen_at(5);
  h.coordinator->on_message(0, msg(MsgKind::done, seq, 5), t0 + 1s);
  EXPECT_LE(h.coordinator->next_wakeup(t0 + 1s), t0 + 60s);
  h.coordinator->tick(t0 + 59s);
  EXPECT_TRUE(h.control.concluded.empty());
  h.coordinator->tick(t0 + 60s);
  ASSERT_EQ(h.control.concluded.size(), 1u);
  EXPECT_EQ(h.control.concluded[0].end, RunEnd::stopped);
}

TEST(Coordinator, APeriodicRoundThatOverrunsTheGraceTimeIsDroppedAndTheRunGoesOn) {
  Harness h;
  h.job.ckpt_every = 600s;
  h.coordinator.reset();
  h.coordinator.emplace(h.options, h.job, 2, std::nullopt, h.control,
                        [&h](const Message& m) { h.sent.push_back(m); });
  h.start();
  h.coordinator->tick(t0 + 599s);
  EXPECT_TRUE(h.sent.empty());
  h.coordinator->tick(t0 + 600s);
  ASSERT_EQ(h.kinds(), std::vector<MsgKind>{MsgKind::prepare});
  h.coordinator->tick(t0 + 660s);  // the grace time (60 s) is over: no conclusion
  EXPECT_TRUE(h.control.concluded.empty());
  // The next round comes on the run's grid: at 1,200 s.
  h.coordinator->tick(t0 + 1199s);
  EXPECT_EQ(h.sent.size(), 1u);
  h.coordinator->tick(t0 + 1200s);
  EXPECT_EQ(h.sent.size(), 2u);
  EXPECT_EQ(h.sent[1].kind, MsgKind::prepare);
}

TEST(Coordinator, TheJobsEndTimeStartsADeadlineCheckpointInTime) {
  Harness h;
  h.control.job.end = h.control.wall + 10min;
  h.start();
  h.coordinator->tick(t0 + 1s);
  EXPECT_TRUE(h.sent.empty());  // 10 minutes left, a checkpoint takes far less
  // The wall clock moves on to within the margin (30 s) plus the estimated save (the
  // grace time, 60 s, until a round has been measured).
  h.control.wall += 9min;
  h.coordinator->tick(t0 + 2s);
  ASSERT_EQ(h.kinds(), std::vector<MsgKind>{MsgKind::prepare});
  ASSERT_FALSE(h.control.events.empty());
  EXPECT_EQ(h.control.events.back().first, "stop_requested");
  EXPECT_NE(h.control.events.back().second.find("deadline (the job ends in 60s"), std::string::npos)
      << h.control.events.back().second;
}

TEST(Coordinator, AFailedRankIsTheCulpritAndEveryRankEndsWithItsCode) {
  Harness h(3);
  h.start();
  h.control.outcome.exit_code = 3;
  h.control.outcome.phase = JobPhase::failed;
  h.coordinator->on_message(2, msg(MsgKind::exit, 0, -1, false, 3, "exited with 3"), t0 + 5s);
  // Held for a second, in case another rank's program was killed (see the next test).
  EXPECT_LE(h.coordinator->next_wakeup(t0 + 5s), t0 + 6s);
  h.coordinator->tick(t0 + 5s + 999ms);
  EXPECT_TRUE(h.sent.empty());
  h.coordinator->tick(t0 + 6s);
  ASSERT_EQ(h.control.concluded.size(), 1u);
  const auto& c = h.control.concluded[0];
  EXPECT_EQ(c.end, RunEnd::failed);
  EXPECT_EQ(c.code, 3);
  EXPECT_EQ(c.why, "rank 2 exited with 3");
  ASSERT_TRUE(c.verdict);
  ASSERT_EQ(h.control.judged.size(), 1u);
  EXPECT_EQ(h.control.judged[0].node, "n2");
  EXPECT_EQ(h.control.judged[0].rank, 2u);
  EXPECT_EQ(h.control.judged[0].kind, CulpritKind::failed);
  // The end is broadcast before the conclusion (the others may be stuck in a
  // collective), with the program's code.
  ASSERT_EQ(h.kinds(), std::vector<MsgKind>{MsgKind::end});
  EXPECT_EQ(h.sent[0].code, 3);
  EXPECT_TRUE(h.control.reported_culprits.empty());  // no job-level launcher
  // A second failure is part of the first.
  h.coordinator->on_message(1, msg(MsgKind::exit, 0, -1, false, 1, "exited with 1"), t0 + 7s);
  EXPECT_EQ(h.control.concluded.size(), 1u);
}

TEST(Coordinator, AKilledRankIsTheCulpritEvenWhenAPeerThatFailedBecauseOfItReportsFirst) {
  Harness h(4);
  h.start();
  h.control.outcome.phase = JobPhase::failed;
  // Rank 1's program was killed; rank 3's collective failed, and its exit came first.
  h.coordinator->on_message(3, msg(MsgKind::exit, 0, -1, false, 1, "exited with 1"), t0 + 5s);
  EXPECT_TRUE(h.control.concluded.empty());
  h.coordinator->on_message(1, msg(MsgKind::exit, 0, -1, false, 137, "killed by signal 9 (Killed)"),
                            t0 + 5s + 300ms);
  // The killed one ends the run at once.
  ASSERT_EQ(h.control.concluded.size(), 1u);
  EXPECT_EQ(h.control.concluded[0].why, "rank 1 killed by signal 9 (Killed)");
  EXPECT_EQ(h.control.concluded[0].code, 137);
  ASSERT_EQ(h.control.judged.size(), 1u);
  EXPECT_EQ(h.control.judged[0].node, "n1");
  EXPECT_EQ(h.control.judged[0].rank, 1u);
  h.coordinator->on_message(2, msg(MsgKind::exit, 0, -1, false, 134, "killed by signal 6"),
                            t0 + 5s + 400ms);
  EXPECT_EQ(h.control.concluded.size(), 1u);
}

TEST(Coordinator, UnderTheLauncherTheCulpritEndsFirstAndTheLauncherDecides) {
  Harness h(3);
  h.job.under_launcher = true;
  h.job.mark_culprit = true;
  h.coordinator.reset();
  h.coordinator.emplace(h.options, h.job, 3, std::nullopt, h.control,
                        [&h](const Message& m) { h.sent.push_back(m); });
  h.coordinator->set_send_to(
      [&h](std::uint32_t rank, const Message& m) { h.sent_to.emplace_back(rank, m); });
  for (std::uint32_t r = 0; r < 3; ++r) h.coordinator->set_node(r, "n" + std::to_string(r));
  h.start();
  h.coordinator->on_message(1, msg(MsgKind::exit, 0, -1, false, kExitHung, "hung"), t0 + 5s);
  h.coordinator->tick(t0 + 6s);
  ASSERT_EQ(h.control.reported_culprits.size(), 1u);
  EXPECT_EQ(h.control.reported_culprits[0].kind, CulpritKind::hung);
  ASSERT_EQ(h.sent_to.size(), 1u);
  EXPECT_EQ(h.sent_to[0].first, 1u);
  EXPECT_EQ(h.sent_to[0].second.code, kExitCulpritStep);
  ASSERT_EQ(h.kinds(), std::vector<MsgKind>{MsgKind::end});
  EXPECT_EQ(h.sent[0].code, kExitRestartStep);
  EXPECT_EQ(h.control.reported_lost, std::vector<std::string>{""});
  EXPECT_TRUE(h.control.concluded.empty());      // the launcher concludes, not this run
  EXPECT_TRUE(h.control.reported_ends.empty());  // a failure, not an end to report
  ASSERT_FALSE(h.control.records.empty());
  EXPECT_EQ(h.control.records.back().end, "failed");
}

TEST(Coordinator, ARankThatFailsWhileSavingTheLastCheckpointIsAFailureNotAStop) {
  Harness h;
  h.control.outcome.phase = JobPhase::failed;
  h.start();
  const std::uint64_t seq = h.stop_frozen_at(7);
  h.coordinator->on_message(0, msg(MsgKind::done, seq, 7), t0 + 1s);
  // Rank 1's save raised: it exits non-zero before its checkpoint was done.
  h.coordinator->on_message(1, msg(MsgKind::exit, 0, -1, false, 1, "exited with 1"), t0 + 2s);
  EXPECT_TRUE(h.control.concluded.empty());  // in case another rank's program was killed
  // Every rank has exited: nothing more to wait for.
  h.coordinator->on_message(0, msg(MsgKind::exit, 0, -1, false, 143, "killed"), t0 + 2s + 100ms);
  ASSERT_EQ(h.control.concluded.size(), 1u);
  EXPECT_EQ(h.control.concluded[0].end, RunEnd::failed);
  EXPECT_EQ(h.control.concluded[0].why,
            "rank 1 failed before its checkpoint was written (exited with 1)");
}

TEST(Coordinator, ARankThatExitsAfterTheStopCheckpointEndsNothing) {
  Harness h;
  h.start();
  const std::uint64_t seq = h.stop_frozen_at(7);
  h.coordinator->on_message(1, msg(MsgKind::done, seq, 7), t0 + 1s);
  h.coordinator->on_message(1, msg(MsgKind::exit, 0, -1, false, 143, "killed"), t0 + 2s);
  EXPECT_TRUE(h.control.concluded.empty());
  h.coordinator->on_message(0, msg(MsgKind::done, seq, 7), t0 + 2s);
  ASSERT_EQ(h.control.concluded.size(), 1u);
  EXPECT_EQ(h.control.concluded[0].end, RunEnd::stopped);
}

TEST(Coordinator, EveryRankCompletedConcludesTheRunAsCompleted) {
  Harness h;
  h.control.outcome.exit_code = 0;
  h.control.outcome.phase = JobPhase::completed;
  h.start();
  h.coordinator->on_message(1, msg(MsgKind::exit, 0, -1, false, 0), t0 + 1s);
  EXPECT_TRUE(h.control.concluded.empty());
  h.coordinator->on_message(0, msg(MsgKind::exit, 0, -1, false, 0), t0 + 2s);
  ASSERT_EQ(h.control.concluded.size(), 1u);
  EXPECT_EQ(h.control.concluded[0].end, RunEnd::completed);
  EXPECT_EQ(h.sent.back().kind, MsgKind::end);
  EXPECT_EQ(h.sent.back().code, 0);
  ASSERT_FALSE(h.control.events.empty());
  EXPECT_EQ(h.control.events.back().first, "completed");
}

TEST(Coordinator, ALostRankNamesItsNodeForTheEndOfTheRun) {
  Harness h;
  h.control.outcome.phase = JobPhase::failed;
  h.start();
  h.coordinator->on_rank_lost(1, "n1", "connection reset", t0 + 3s);
  ASSERT_EQ(h.control.concluded.size(), 1u);
  EXPECT_EQ(h.control.concluded[0].lost_node, "n1");
  EXPECT_EQ(h.control.concluded[0].why, "lost rank 1: connection reset");
  ASSERT_EQ(h.control.judged.size(), 1u);
  EXPECT_EQ(h.control.judged[0].kind, CulpritKind::lost);
}

TEST(Coordinator, WithoutTheClientApiAStopEndsAtOnceInsteadOfWaitingOutTheGraceTime) {
  Harness h;
  h.start();
  h.coordinator->on_message(0, msg(MsgKind::want, 0, -1, true, 0, "preempted"), t0);
  const std::uint64_t seq = h.sent[0].seq;
  h.coordinator->on_message(0, msg(MsgKind::step, seq, kNoClientApi, false), t0);
  h.coordinator->on_message(1, msg(MsgKind::step, seq, kNoClientApi, false), t0);
  ASSERT_EQ(h.control.concluded.size(), 1u);
  EXPECT_EQ(h.control.concluded[0].end, RunEnd::stopped);
}

TEST(Coordinator, TheStatusLineGoesAfterTheSubmitTimeCommentAndCheckpointsAreRecorded) {
  Harness h;
  h.control.program.step = 12;
  h.start();
  ASSERT_FALSE(h.control.comments.empty());
  EXPECT_EQ(h.control.comments.back().rfind("dl: gpus=2", 0), 0u) << h.control.comments.back();
  EXPECT_NE(h.control.comments.back().find("RUNNING"), std::string::npos)
      << h.control.comments.back();
  // The program reports a checkpoint written: recorded once.
  h.control.program.done_step = 12;
  h.coordinator->tick(t0 + 1s);
  h.coordinator->tick(t0 + 2s);
  EXPECT_EQ(h.control.checkpoints, std::vector<std::int64_t>{12});
  ASSERT_FALSE(h.control.records.empty());
  EXPECT_EQ(h.control.records.back().job, "4711");
}

TEST(Coordinator, AnUnreadableJobMeansNoDeadlineAndNoCommentButTheRunGoesOn) {
  Harness h;
  h.control.job_readable = false;
  h.control.job.end = h.control.wall + 1min;
  h.start();
  h.coordinator->tick(t0 + 1s);
  EXPECT_TRUE(h.sent.empty());
  EXPECT_TRUE(h.control.comments.empty());
}

}  // namespace
}  // namespace dl
