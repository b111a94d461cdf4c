// The pure parts of dlrun: the environment the program gets, port choice, restart
// guard, deadline, checkpoint-step agreement, status line, log prefix, control protocol.
#include "launcher/launch.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <map>

#include "core/deadline.h"
#include "core/error.h"
#include "core/signals.h"
#include "core/sysio.h"
#include "launcher/agreement.h"
#include "launcher/control.h"
#include "launcher/ports.h"
#include "launcher/rank_log.h"
#include "launcher/restart.h"
#include "launcher/restart_state.h"
#include "launcher/resume.h"
#include "launcher/status.h"

namespace dl {
namespace {

using namespace std::chrono_literals;

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

std::map<std::string, std::string> as_map(const std::vector<std::string>& env) {
  std::map<std::string, std::string> m;
  for (const auto& e : env) m[e.substr(0, e.find('='))] = e.substr(e.find('=') + 1);
  return m;
}

TaskContext sample_task() {
  TaskContext t;
  t.layout = {3, 8, 1, 2, 1};
  t.rendezvous.master_addr = "10.0.0.1";
  t.rendezvous.master_port = 29500;
  t.rendezvous.control_port = 40000;
  t.rendezvous.node = "n1";
  t.rendezvous.nccl_id_hex = "ab01";
  t.rendezvous.resume_from = "/ckpt/step-000001200";
  t.rendezvous.resume_step = 1200;
  t.rendezvous.secret = std::string(64, 'c');
  t.restart_count = 2;
  t.ckpt_dir = "/ckpt";
  t.client_file = "/dev/shm/dlrun-1";
  t.socket_ifname = "eth0";
  return t;
}

TEST(LaunchEnv, TorchrunVariablesAndDlVariables) {
  const auto env = as_map(apply_env({"PATH=/bin"}, program_env(sample_task())));
  EXPECT_EQ(env.at("RANK"), "3");
  EXPECT_EQ(env.at("WORLD_SIZE"), "8");
  EXPECT_EQ(env.at("LOCAL_RANK"), "1");
  EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), "2");
  EXPECT_EQ(env.at("GROUP_RANK"), "1");
  EXPECT_EQ(env.at("MASTER_ADDR"), "10.0.0.1");
  EXPECT_EQ(env.at("MASTER_PORT"), "29500");
  EXPECT_EQ(env.at("TORCHELASTIC_RESTART_COUNT"), "2");
  EXPECT_EQ(env.at("DL_RESTART_COUNT"), "2");
  EXPECT_EQ(env.at("DL_NCCL_UNIQUE_ID"), "ab01");
  EXPECT_EQ(env.at("DL_CKPT_DIR"), "/ckpt");
  EXPECT_EQ(env.at("DL_RESUME_FROM"), "/ckpt/step-000001200");
  EXPECT_EQ(env.at("DL_CLIENT_FILE"), "/dev/shm/dlrun-1");
  EXPECT_EQ(env.at("GLOO_SOCKET_IFNAME"), "eth0");
  EXPECT_EQ(env.at("PATH"), "/bin");
}

TEST(LaunchEnv, StaleValuesAreReplacedOrRemoved) {
  TaskContext t = sample_task();
  t.rendezvous.resume_from.clear();
  t.rendezvous.nccl_id_hex.clear();
  const auto env = as_map(
      apply_env({"RANK=7", "DL_RESUME_FROM=/old", "DL_NCCL_UNIQUE_ID=ff", "GLOO_SOCKET_IFNAME=ib0"},
                program_env(t)));
  EXPECT_EQ(env.at("RANK"), "3");
  EXPECT_EQ(env.count("DL_RESUME_FROM"), 0u) << "a fresh start must not see an old checkpoint";
  EXPECT_EQ(env.count("DL_NCCL_UNIQUE_ID"), 0u);
  EXPECT_EQ(env.at("GLOO_SOCKET_IFNAME"), "ib0") << "the user's choice wins";
}

TEST(LaunchEnv, TorchStoreWithoutLibuvUnlessTheUserChose) {
  EXPECT_EQ(as_map(apply_env({}, program_env(sample_task()))).at("USE_LIBUV"), "0");
  EXPECT_EQ(as_map(apply_env({"USE_LIBUV=1"}, program_env(sample_task()))).at("USE_LIBUV"), "1");
}

TEST(LaunchEnv, OrderIsKeptAndNewVariablesAppended) {
  EnvChanges c;
  c.set = {{"B", "2"}, {"D", "4"}};
  c.unset = {"C"};
  EXPECT_EQ(apply_env({"A=1", "B=x", "C=3"}, c), (std::vector<std::string>{"A=1", "B=2", "D=4"}));
}

TEST(Rendezvous, RoundTripsAndRejectsGarbage) {
  const Rendezvous r = sample_task().rendezvous;
  const Rendezvous back = decode_rendezvous(encode_rendezvous(r));
  EXPECT_EQ(back.master_addr, r.master_addr);
  EXPECT_EQ(back.master_port, r.master_port);
  EXPECT_EQ(back.control_port, r.control_port);
  EXPECT_EQ(back.node, "n1");
  EXPECT_EQ(back.nccl_id_hex, r.nccl_id_hex);
  EXPECT_EQ(back.resume_from, r.resume_from);
  EXPECT_EQ(back.resume_step, 1200);
  EXPECT_EQ(back.secret, r.secret);
  EXPECT_THROW(decode_rendezvous("{"), SystemError);
  // Without the step's secret no rank could authenticate to rank 0.
  EXPECT_THROW(
      decode_rendezvous(R"({"addr":"a","node":"n1","port":1,"ctrl":2,"nccl":"","resume":"",)"
                        R"("resume_step":-1,"key":""})"),
      SystemError);
  EXPECT_THROW(
      decode_rendezvous(R"({"addr":"","node":"n1","port":1,"ctrl":2,"nccl":"","resume":"",)"
                        R"("resume_step":-1})"),
      SystemError);
  for (
      const char* bad :
      {R"({"addr":"a","node":"n1","port":70000,"ctrl":2,"nccl":"","resume":"","resume_step":-1})",
       R"({"addr":"a","node":"n1","port":1.5,"ctrl":2,"nccl":"","resume":"","resume_step":-1})",
       R"({"addr":"a","node":"n1","port":1,"ctrl":2,"nccl":"","resume":"","resume_step":-2})",
       R"({"addr":"a","node":"n1","port":1,"ctrl":2,"nccl":"","resume":"","resume_step":1e300})"}) {
    EXPECT_THROW(decode_rendezvous(bad), SystemError) << bad;
  }
  Rendezvous failed;
  failed.error = "no free port";
  EXPECT_EQ(decode_rendezvous(encode_rendezvous(failed)).error, "no free port");
}

TEST(Hex, LowerCaseTwoDigitsPerByte) {
  const unsigned char bytes[] = {0x00, 0x0f, 0xa0, 0xff};
  EXPECT_EQ(to_hex(bytes, sizeof bytes), "000fa0ff");
}

TEST(Ports, ParsesSlurmReservedRanges) {
  EXPECT_EQ(parse_port_list("12000-12002"), (std::vector<std::uint16_t>{12000, 12001, 12002}));
  EXPECT_EQ(parse_port_list("12000-12001,12005"),
            (std::vector<std::uint16_t>{12000, 12001, 12005}));
  EXPECT_EQ(parse_port_list("80"), (std::vector<std::uint16_t>{80}));
  for (const char* bad : {"", "a", "12-", "12002-12000", "0-3", "65536", "1,,2", "1-2-3"}) {
    EXPECT_EQ(error_of([&] { parse_port_list(bad); }),
              std::string("SLURM_STEP_RESV_PORTS=") + bad +
                  ": expected port ranges such as 12000-12003 or 12000-12001,12005")
        << bad;
  }
}

TEST(Ports, FirstFreeInOrder) {
  const auto busy = [](std::uint16_t p) { return p != 12000 && p != 12001; };
  EXPECT_EQ(first_free_port({12000, 12001, 12002, 12003}, busy), 12002);
  EXPECT_EQ(first_free_port({12000, 12001}, busy), std::nullopt);
}

TEST(Restart, HistoryRoundTripsAndRejectsGarbage) {
  const RestartHistory h{2, 1, std::nullopt};
  const RestartHistory back = decode_history(encode_history(h));
  EXPECT_EQ(back.failures, 2u);
  EXPECT_EQ(back.stalled, 1u);
  for (const char* bad : {"", "failures=1", "failures=x stalled=0", "stalled=0 failures=1"}) {
    EXPECT_THROW(decode_history(bad), InputError) << bad;
  }
}

// Issue 12, item 6: dlrun's restart history is read by the run that decides about the
// next one. A FIFO, a link to /dev/zero or a huge sparse file at its name fails at once
// (the guard then starts a new history) instead of hanging or filling memory; a link
// planted at it or at a temporary name is never written through.
class RestartHistoryFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dl-history-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir = tmpl;
    path = history_path(dir, "77");
  }
  void TearDown() override { dl::sys::remove_tree(dir); }
  std::string dir, path;
};

TEST_F(RestartHistoryFile, RoundTripsAndAMissingFileIsEmpty) {
  EXPECT_EQ(read_history(path).failures, 0u);
  write_history(path, {2, 1, std::nullopt});
  EXPECT_EQ(read_history(path).failures, 2u);
  EXPECT_EQ(read_history(path).stalled, 1u);
  remove_history(path);
  EXPECT_EQ(read_history(path).stalled, 0u);
}

TEST_F(RestartHistoryFile, AFifoIsRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  EXPECT_THROW(read_history(path), SystemError);
}

TEST_F(RestartHistoryFile, ALinkToDevZeroIsRefused) {
  ASSERT_EQ(::symlink("/dev/zero", path.c_str()), 0);
  EXPECT_THROW(read_history(path), SystemError);
}

TEST_F(RestartHistoryFile, AHugeSparseFileIsRefused) {
  write_history(path, {1, 1, std::nullopt});
  ASSERT_EQ(::truncate(path.c_str(), off_t{1} << 40), 0);
  EXPECT_THROW(read_history(path), SystemError);
}

TEST_F(RestartHistoryFile, LinksPlantedAtItsNamesAreNotWrittenThrough) {
  const std::string victim = dir + "/victim";
  {
    std::FILE* f = std::fopen(victim.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("precious", f);
    std::fclose(f);
  }
  ASSERT_EQ(::symlink(victim.c_str(), (path + ".tmp").c_str()), 0);
  ASSERT_EQ(::symlink(victim.c_str(), path.c_str()), 0);
  write_history(path, {1, 0, std::nullopt});
  EXPECT_EQ(dl::sys::read_file(victim, 100), "precious");
  EXPECT_EQ(read_history(path).failures, 1u);
}

// Issue 12, item 2: a newer checkpoint counts as progress only if every checksum
// verifies (the lookup is latest_valid at this level, tested in ckpt_test), so a corrupt
// one never resets the stalled-run count.
TEST(Restart, ProgressIsJudgedByEveryChecksum) {
  EXPECT_EQ(kProgressCheck, CheckLevel::full);
  // A run that left only a corrupt newer checkpoint: the lookup finds the old step.
  const auto d = decide_restart({10, 1}, {0, 1, std::nullopt}, RunEnd::stopped, 200, 200);
  EXPECT_EQ(d.action, RestartAction::hold);
}

TEST(Restart, CompletedFinishes) {
  const auto d = decide_restart({3, 2}, {1, 1, std::nullopt}, RunEnd::completed, 10, 20);
  EXPECT_EQ(d.action, RestartAction::finish);
}

TEST(Restart, FailuresRequeueUntilTheLimitThenHold) {
  RestartHistory h;
  for (int run = 0; run < 3; ++run) {
    // Every run makes progress, so only the failure count matters.
    const auto d = decide_restart({3, 2}, h, RunEnd::failed, run * 100, run * 100 + 50);
    ASSERT_EQ(d.action, RestartAction::requeue) << "run " << run;
    EXPECT_EQ(d.reason, "restart " + std::to_string(run + 1) + " of 3 after a failure");
    h = d.history;
  }
  const auto last = decide_restart({3, 2}, h, RunEnd::failed, 300, 350);
  EXPECT_EQ(last.action, RestartAction::hold);
  EXPECT_EQ(last.reason, "no restarts left (4 failures, --dl-max-restarts=3)");
}

TEST(Restart, NoProgressOverKRestartsHolds) {
  // K = 2: the first run and two restarts without a newer checkpoint, then held.
  RestartHistory h;
  auto d = decide_restart({10, 2}, h, RunEnd::failed, std::nullopt, std::nullopt);
  EXPECT_EQ(d.action, RestartAction::requeue);
  d = decide_restart({10, 2}, d.history, RunEnd::failed, std::nullopt, std::nullopt);
  EXPECT_EQ(d.action, RestartAction::requeue);
  d = decide_restart({10, 2}, d.history, RunEnd::failed, std::nullopt, std::nullopt);
  EXPECT_EQ(d.action, RestartAction::hold);
  EXPECT_EQ(d.reason, "no newer checkpoint in 3 runs in a row (no checkpoint yet)");
}

TEST(Restart, ProgressResetsTheStallCount) {
  auto d = decide_restart({10, 1}, {0, 1, std::nullopt}, RunEnd::stopped, 100, 200);
  EXPECT_EQ(d.action, RestartAction::requeue);
  EXPECT_EQ(d.history.stalled, 0u);
  d = decide_restart({10, 1}, d.history, RunEnd::stopped, 200, 200);
  EXPECT_EQ(d.action, RestartAction::requeue);
  d = decide_restart({10, 1}, d.history, RunEnd::stopped, 200, 200);
  EXPECT_EQ(d.action, RestartAction::hold);
  EXPECT_EQ(d.reason, "no newer checkpoint in 2 runs in a row (still at step 200)");
  EXPECT_EQ(d.history.failures, 0u) << "stops are not failures";
}

TEST(Deadline, EndMinusSaveMinusMargin) {
  const auto end = WallClock::from_time_t(10'000);
  EXPECT_EQ(deadline_checkpoint_time(end, 120s, 30s), WallClock::from_time_t(10'000 - 150));
  EXPECT_EQ(deadline_checkpoint_time(std::nullopt, 120s, 30s), std::nullopt);
}

TEST(Deadline, LeavesAPreemptionTimeForItsSignal) {
  const auto end = WallClock::from_time_t(10'000);
  // Preempted 60 s before the end (its GraceTime): the signal gets 10 s first.
  EXPECT_EQ(deadline_checkpoint_time(end, 120s, 30s, WallClock::from_time_t(9'940)),
            WallClock::from_time_t(9'950));
  // Preempted long before the deadline checkpoint is due: that time stands.
  EXPECT_EQ(deadline_checkpoint_time(end, 120s, 30s, WallClock::from_time_t(9'000)),
            WallClock::from_time_t(10'000 - 150));
  EXPECT_EQ(deadline_checkpoint_time(std::nullopt, 120s, 30s, WallClock::from_time_t(9'000)),
            std::nullopt);
}

TEST(Deadline, MeasuredSaveTimeReplacesTheDeclaredOne) {
  SaveTimeEstimate e(120s);
  EXPECT_EQ(e.value(), 120s);
  e.record(8s);
  EXPECT_EQ(e.value(), 8s);
  e.record(5s);
  EXPECT_EQ(e.value(), 8s) << "the longest save measured so far";
  e.record(12s);
  EXPECT_EQ(e.value(), 12s);
}

TEST(Agreement, FrozenRanksStayRunningRanksMoveOn) {
  EXPECT_EQ(agree_on_step({{true, 100}, {true, 100}}), 100);
  EXPECT_EQ(agree_on_step({{true, 100}, {false, 100}}), 101)
      << "the running rank reaches 101 before it can learn the target";
  EXPECT_EQ(agree_on_step({{true, 101}, {false, 100}}), 101);
  EXPECT_EQ(agree_on_step({{false, -1}, {true, 7}}), 7) << "a rank without the client API";
  EXPECT_EQ(agree_on_step({{false, -1}, {false, -1}}), -1);
}

TEST(Agreement, RoundCompletesWhenEveryRankIsDoneOrExited) {
  CheckpointRound r(4, 3, false);
  EXPECT_EQ(r.seq(), 4u);
  r.report(0, {true, 10});
  r.report(0, {true, 99});  // a duplicate is ignored
  r.report(2, {false, 10});
  EXPECT_FALSE(r.reports_complete());
  r.exited(1);
  EXPECT_TRUE(r.reports_complete());
  EXPECT_EQ(r.target(), 11);
  EXPECT_EQ(r.outstanding(), 2u);
  r.done(0);
  EXPECT_FALSE(r.complete());
  r.done(2);
  EXPECT_TRUE(r.complete());
  EXPECT_FALSE(r.stop());
  r.make_stop();
  EXPECT_TRUE(r.stop());
}

TEST(Agreement, DyingBeforeTheLastCheckpointIsAFailure) {
  // Preempted: rank 0 and rank 1 use the client API, rank 2 does not.
  CheckpointRound r(1, 4, true);
  r.report(0, {true, 10});
  r.report(1, {false, -1});  // loaded the client API, no step yet
  r.report(2, {false, kNoClientApi});
  EXPECT_TRUE(r.failed_to_checkpoint(0, 1, 0)) << "its save raised: nothing to resume";
  EXPECT_TRUE(r.failed_to_checkpoint(0, 128 + SIGKILL, 0));
  EXPECT_TRUE(r.failed_to_checkpoint(1, 1, 0));
  EXPECT_FALSE(r.failed_to_checkpoint(0, 0, 0)) << "exit 0 is no failure";
  EXPECT_FALSE(r.failed_to_checkpoint(2, 1, 0)) << "it cannot checkpoint: stopping is all it does";
  EXPECT_FALSE(r.failed_to_checkpoint(3, 1, 0)) << "not in the round yet";
  EXPECT_FALSE(r.failed_to_checkpoint(7, 1, 0));
  // --ckpt-signal=TERM: SIGTERM is how the program stops.
  EXPECT_FALSE(r.failed_to_checkpoint(0, 128 + SIGTERM, SIGTERM));
  EXPECT_TRUE(r.failed_to_checkpoint(0, 1, SIGTERM));
  EXPECT_TRUE(r.failed_to_checkpoint(0, 128 + SIGTERM, 0));
  r.done(0);
  EXPECT_FALSE(r.failed_to_checkpoint(0, 1, 0)) << "saved, then stopped: the run's stop";
  r.exited(1);
  EXPECT_FALSE(r.failed_to_checkpoint(1, 1, 0)) << "its exit is counted once";

  // A periodic round: a failure is one anyway, judged without the round.
  CheckpointRound periodic(2, 1, false);
  periodic.report(0, {true, 10});
  EXPECT_FALSE(periodic.failed_to_checkpoint(0, 1, 0));
  periodic.make_stop();
  EXPECT_TRUE(periodic.failed_to_checkpoint(0, 1, 0)) << "a stop arrived during the round";
}

TEST(Agreement, ARunningRankIsAnsweredForWithinAFewMilliseconds) {
  // A rank blocked in a collective with a peer that stopped at its report_step cannot
  // stop itself: every rank waits until it is answered for (it was after 500 ms).
  EXPECT_TRUE(answer_round_now(false, 100, 20ms));
  EXPECT_TRUE(answer_round_now(false, 100, 50ms));
  EXPECT_FALSE(answer_round_now(false, 100, 1ms)) << "a program just at its report_step";
  EXPECT_TRUE(answer_round_now(true, 100, 0ms)) << "stopped: answered at once";
  EXPECT_TRUE(answer_round_now(false, -1, 0ms)) << "no step reported yet";
  EXPECT_TRUE(answer_round_now(false, kNoClientApi, 0ms));
}

TEST(Agreement, PeriodicRoundsComeEveryIntervalWhateverARoundTakes) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0{};
  // A round that started at 30 s and took 0.4 s: the next one at 60 s, not 60.4 s (the
  // interval, and half of it lost on average by a failure, is what --dl-ckpt-every says).
  EXPECT_EQ(next_periodic_round(t0, t0 + 30400ms, 30s), t0 + 60s);
  EXPECT_EQ(next_periodic_round(t0, t0 + 30s, 30s), t0 + 60s);
  // A round slower than half the interval: at least half an interval of training after
  // it, at the next point of the grid (back-to-back rounds would leave none).
  EXPECT_EQ(next_periodic_round(t0, t0 + 70s, 30s), t0 + 90s);
  EXPECT_EQ(next_periodic_round(t0, t0 + 50s, 30s), t0 + 90s);
  EXPECT_EQ(next_periodic_round(t0, t0 + 45s, 30s), t0 + 60s);
}

TEST(Agreement, PeriodicRoundsStayOnTheRunsGridWherePreemptDlExpectsThem) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0{};
  // preempt/dl takes a victim right after k x --dl-ckpt-every of run time, as if it had
  // just checkpointed. A round of another kind (SIGUSR1) at 40 s: the periodic one still
  // at 60 s, not 70 s.
  EXPECT_EQ(next_periodic_round(t0, t0 + 41s, 30s), t0 + 60s);
  // A restore longer than the interval: the round asked for at 30 s ends when the program
  // first steps, at 51 s; the next one at 90 s, on the grid (not at 66 s and every 30 s
  // from there, always 6 s after preempt/dl's windows).
  EXPECT_EQ(next_periodic_round(t0, t0 + 51s, 30s), t0 + 90s);
  EXPECT_EQ(next_periodic_round(t0 + 5s, t0 + 51s, 30s), t0 + 95s);
}

TEST(Agreement, ARoundKnowsWhenNoProgramCanCheckpoint) {
  CheckpointRound none(1, 2, true);
  none.report(0, {false, kNoClientApi});
  none.exited(1);  // an exited program cannot checkpoint either
  EXPECT_TRUE(none.reports_complete());
  EXPECT_TRUE(none.no_client_api());
  EXPECT_EQ(none.target(), -1);
  CheckpointRound starting(2, 2, true);
  starting.report(0, {false, kNoClientApi});
  starting.report(1, {false, -1});  // loaded the client API, no step yet: it will checkpoint
  EXPECT_FALSE(starting.no_client_api());
  EXPECT_EQ(agree_on_step({{false, kNoClientApi}, {true, 7}}), 7);
}

TEST(Status, ContractFormat) {
  Status s;
  s.step = 1200;
  s.ckpt_step = 1100;
  s.ckpt_age = 130s;
  EXPECT_EQ(format_status(s), "RUNNING step 1200, ckpt 1100 (2m ago)");
  s.metrics = "loss=0.31";
  s.metrics_step = 1200;
  EXPECT_EQ(format_status(s), "RUNNING step 1200, ckpt 1100 (2m ago), loss=0.31");
  s.metrics_step = 1150;
  EXPECT_EQ(format_status(s), "RUNNING step 1200, ckpt 1100 (2m ago), loss=0.31 (step 1150)")
      << "metrics reported less often than steps";
  Status held;
  held.phase = JobPhase::held;
  held.step = 5;
  held.detail = "no newer checkpoint in 3 runs in a row (no checkpoint yet)";
  EXPECT_EQ(format_status(held),
            "HELD step 5, no checkpoint yet: no newer checkpoint in 3 runs in a row (no "
            "checkpoint yet)");
  EXPECT_EQ(format_status(Status{}), "RUNNING");
  Status long_metrics;
  long_metrics.metrics = std::string(200, 'x');
  EXPECT_EQ(format_status(long_metrics).size(), std::string("RUNNING, ").size() + 120 + 3);
}

TEST(Status, Ages) {
  EXPECT_EQ(format_age(0s), "0s");
  EXPECT_EQ(format_age(59s), "59s");
  EXPECT_EQ(format_age(60s), "1m");
  EXPECT_EQ(format_age(3599s), "59m");
  EXPECT_EQ(format_age(3600s), "1h");
  EXPECT_EQ(format_age(86400s * 3), "3d");
  EXPECT_EQ(format_age(-5s), "0s") << "clock skew between nodes";
}

TEST(Status, CommentKeepsWhatCameBeforeTheSeparator) {
  EXPECT_EQ(comment_prefix("dl: 16 GPUs as 2x8, preemptible | RUNNING step 1"),
            "dl: 16 GPUs as 2x8, preemptible");
  EXPECT_EQ(comment_prefix("my note"), "my note");
  EXPECT_EQ(comment_prefix(""), "");
  EXPECT_EQ(merge_comment("dl: 16 GPUs as 2x8, preemptible", "RUNNING step 2"),
            "dl: 16 GPUs as 2x8, preemptible | RUNNING step 2");
  EXPECT_EQ(merge_comment("", "RUNNING"), "dl | RUNNING");
  EXPECT_EQ(comment_prefix(merge_comment("", "RUNNING")), "dl") << "stable across runs";
}

TEST(Status, RateLimited) {
  RateLimiter limit(60s);
  const RateLimiter::Clock::time_point t0{};
  EXPECT_TRUE(limit.allow(t0, "a", false));
  EXPECT_FALSE(limit.allow(t0 + 10s, "b", false)) << "within the interval";
  EXPECT_TRUE(limit.allow(t0 + 10s, "c", true)) << "a phase change goes through";
  EXPECT_FALSE(limit.allow(t0 + 100s, "c", false)) << "the same text twice";
  EXPECT_TRUE(limit.allow(t0 + 100s, "d", false));
}

TEST(RankLog, Prefix) { EXPECT_EQ(rank_prefix(3, "n2"), "[rank 3@n2]"); }

TEST(RankLog, WholeLinesOnly) {
  std::string out;
  LinePrefixer p(
      "[rank 0@n1]", [&](std::string_view line) { out += line; }, 8);
  p.feed("hel");
  EXPECT_EQ(out, "");
  p.feed("lo\nwor");
  EXPECT_EQ(out, "[rank 0@n1] hello\n");
  p.feed("ld\n\nx");
  EXPECT_EQ(out, "[rank 0@n1] hello\n[rank 0@n1] world\n[rank 0@n1] \n");
  p.feed("0123456789");  // longer than 8 without a newline: cut
  EXPECT_EQ(out.substr(out.rfind("] ") + 2), "x0123456\n");
  p.finish();
  EXPECT_EQ(out.substr(out.rfind("] ") + 2), "789\n");
}

TEST(Control, EveryMessageRoundTrips) {
  const auto make = [](MsgKind kind, std::uint32_t rank, std::uint64_t seq, std::int64_t step,
                       bool flag, int code, std::string text) {
    return Message{kind, rank, seq, step, flag, code, std::move(text), ""};
  };
  Message hello = make(MsgKind::hello, 7, 0, -1, false, 0, "n3");
  hello.key = "0123456789abcdef";
  const std::vector<Message> messages = {
      hello,
      make(MsgKind::want, 0, 0, -1, true, 0, "SIGTERM"),
      make(MsgKind::step, 0, 3, 1200, true, 0, ""),
      make(MsgKind::step, 0, 3, -1, false, 0, ""),
      make(MsgKind::step, 0, 3, kNoClientApi, false, 0, ""),
      make(MsgKind::done, 0, 3, 1201, false, 0, ""),
      make(MsgKind::exit, 0, 0, -1, false, 137, "killed by signal 9 (Killed)"),
      make(MsgKind::prepare, 0, 9, -1, false, 0, ""),
      make(MsgKind::target, 0, 9, 1201, true, 0, ""),
      make(MsgKind::stop_after, 0, 9, -1, false, 0, ""),
      make(MsgKind::end, 0, 0, -1, false, 75, "deadline"),
      make(MsgKind::gpu, 0, 0, -1, false, 0, "0:85:12288:81920 1:3:100:81920"),
  };
  for (const auto& m : messages) {
    const std::string line = format_message(m);
    ASSERT_EQ(line.back(), '\n');
    const Message back = parse_message(line.substr(0, line.size() - 1));
    EXPECT_EQ(format_message(back), line);
  }
  EXPECT_EQ(format_message(make(MsgKind::end, 0, 0, -1, false, 1, "two\nlines")),
            "END 1 two lines\n");
}

TEST(Control, MalformedMessagesAreErrors) {
  for (const char* bad : {"", "HELLO", "HELLO x", "HELLO x n1", "HELLO 1", "HELLO 1 XYZ n1",
                          "STEP 1 2 3", "TARGET 1 -2 0", "NOPE 1", "END 300 x", "DONE 1"}) {
    EXPECT_THROW(parse_message(bad), SystemError) << bad;
  }
}

TEST(ControlHandshake, OnlyAHelloWithTheStepSecretIsARank) {
  const std::string secret = new_step_secret();
  const auto hello = [](std::uint32_t rank, const std::string& key) {
    Message m;
    m.kind = MsgKind::hello;
    m.rank = rank;
    m.key = key;
    m.text = "n2";
    const std::string line = format_message(m);
    return line.substr(0, line.size() - 1);
  };
  const HelloCheck good = check_hello(hello(1, secret), secret, 4);
  ASSERT_TRUE(good.hello);
  EXPECT_EQ(good.hello->rank, 1u);
  EXPECT_EQ(good.hello->text, "n2");

  std::string other = secret;
  other.back() = other.back() == '0' ? '1' : '0';
  const std::vector<std::pair<std::string, std::string>> refused = {
      {hello(1, other), "wrong key"},
      {hello(1, secret.substr(0, 63)), "wrong key"},
      {hello(1, secret + "00"), "not a control message"},  // longer than any key
      {hello(0, secret), "no rank 0 in a step of 4"},
      {hello(4, secret), "no rank 4 in a step of 4"},
      {"HELLO 1", "not a control message"},  // the old, unauthenticated HELLO
      {"WANT 1 evil", "did not start with HELLO"},
      {"END 1 evil", "did not start with HELLO"},
      {"GET / HTTP/1.0", "not a control message"},
      {std::string("\x00\xff garbage", 11), "not a control message"},
  };
  for (const auto& [line, why] : refused) {
    const HelloCheck c = check_hello(line, secret, 4);
    EXPECT_FALSE(c.hello) << line;
    EXPECT_EQ(c.why, why) << line;
  }
  // No secret (a bug) lets nobody in, not even an empty key.
  EXPECT_FALSE(check_hello(hello(1, secret), "", 4).hello);
}

TEST(ControlHandshake, SecretsAreFreshHexAndComparedWhole) {
  const std::string a = new_step_secret();
  const std::string b = new_step_secret();
  EXPECT_EQ(a.size(), 2 * kSecretBytes);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);
  EXPECT_TRUE(same_secret(a, a));
  EXPECT_FALSE(same_secret(a, b));
  EXPECT_FALSE(same_secret(a, a.substr(0, 10)));
  EXPECT_FALSE(same_secret("", a));
  EXPECT_TRUE(same_secret("", ""));
}

TEST(Control, LineBufferSplitsAndBoundsLines) {
  LineBuffer b;
  b.append("HELLO 1\nWANT 1 SIG");
  EXPECT_EQ(b.pending(), 18u);
  EXPECT_EQ(b.next_line(), "HELLO 1");
  EXPECT_EQ(b.next_line(), std::nullopt);
  b.append("TERM\n");
  EXPECT_EQ(b.next_line(), "WANT 1 SIGTERM");
  EXPECT_THROW(b.append(std::string(LineBuffer::kMaxLine + 1, 'x')), SystemError);
}

TEST(Signals, IgnoredSignalsFromProcStatus) {
  // SIGTERM (15) and SIGUSR2 (12) ignored: bits 14 and 11.
  const std::string status =
      "Name:\tdp_trainer\nSigBlk:\t0000000000000000\n"
      "SigIgn:\t0000000000004800\nSigCgt:\t0000000180000000\n";
  EXPECT_TRUE(status_ignores(status, SIGTERM));
  EXPECT_TRUE(status_ignores(status, SIGUSR2));
  EXPECT_FALSE(status_ignores(status, SIGINT));
  EXPECT_FALSE(status_ignores("Name:\tx\n", SIGTERM));
  EXPECT_FALSE(status_ignores("SigIgn:\tzz\n", SIGTERM));
  EXPECT_FALSE(status_ignores(status, 0));
}

TEST(Signals, NamesAndNumbers) {
  EXPECT_EQ(parse_signal("--ckpt-signal", "URG"), SIGURG);
  EXPECT_EQ(parse_signal("--ckpt-signal", "SIGUSR2"), SIGUSR2);
  EXPECT_EQ(parse_signal("--ckpt-signal", "10"), 10);
  EXPECT_EQ(parse_signal("--ckpt-signal", "none"), 0);
  EXPECT_EQ(
      error_of([] { parse_signal("--ckpt-signal", "SIGFOO"); }),
      "--ckpt-signal=SIGFOO: expected a signal name such as URG or SIGURG, a number, or none");
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_name(SIGRTMIN + 1), "signal " + std::to_string(SIGRTMIN + 1));
}

}  // namespace
}  // namespace dl

namespace dl {
namespace {

TEST(Restart, HistoryKeepsTheLastCheckpointAndReadsTheOldForm) {
  RestartHistory h{1, 0, 1200};
  EXPECT_EQ(encode_history(h), "failures=1 stalled=0 ckpt=1200\n");
  EXPECT_EQ(decode_history(encode_history(h)).ckpt, 1200);
  EXPECT_EQ(decode_history("failures=2 stalled=1\n").ckpt, std::nullopt);
  EXPECT_THROW(decode_history("failures=2 stalled=1 ckpt=x\n"), InputError);
  const RestartDecision d = decide_restart({3, 2}, {}, RunEnd::stopped, std::nullopt, 1300);
  EXPECT_EQ(d.history.ckpt, 1300);
}

TEST(Restart, ADefaultDirectoryResumesOnlyTheJobsOwnCheckpoints) {
  const ResumeCandidate own{"/c/4711/step-000001200", 1200, "4711",
                            "job 4711 (user alice, uid 1000)"};
  const ResumeCandidate other{"/c/4711/step-000001200", 1200, "4700_2",
                              "array task 4700_2 (user alice, uid 1000)"};
  const ResumeCandidate unknown{"/c/4711/step-000001200", 1200, "", "an unknown job"};
  EXPECT_EQ(resume_refusal(own, CkptDirKind::site_default, "4711", "/c/4711"), "");
  EXPECT_NE(
      resume_refusal(other, CkptDirKind::site_default, "4711", "/c/4711")
          .find("written by array task 4700_2 (user alice, uid 1000), not by this job (4711)"),
      std::string::npos);
  EXPECT_NE(resume_refusal(unknown, CkptDirKind::site_default, "4711", "/c/4711"), "");
  // A directory the user chose (shared on purpose) accepts any writer.
  EXPECT_EQ(resume_refusal(other, CkptDirKind::chosen, "4711", "/c/4711"), "");
  EXPECT_EQ(resume_message(own),
            "resuming step 1200 from /c/4711/step-000001200, written by job 4711 (user alice, uid "
            "1000)");
}

TEST(Restart, AMissingCheckpointIsNamed) {
  EXPECT_EQ(missing_checkpoint_warning(1200, "4711", "/c/4711", std::nullopt, std::nullopt),
            "job 4711 had checkpoint step 1200 in /c/4711 (its restart history or job comment "
            "says so), but /c/4711 has none: starting from step 0, as a new run. The checkpoint "
            "root is probably not shared between the nodes (see spank_dl(8), shared_ckpt_root), "
            "or the checkpoint was removed or is unusable");
  EXPECT_NE(missing_checkpoint_warning(1200, "4711", "/c/4711", 1100, 1100)
                .find("but /c/4711 has only step 1100: resuming step 1100."),
            std::string::npos);
  EXPECT_EQ(missing_checkpoint_warning(1200, "4711", "/c/4711", 1200, 1200), "");
  EXPECT_EQ(missing_checkpoint_warning(std::nullopt, "4711", "/c/4711", std::nullopt, std::nullopt),
            "");
  // A run that continued another job's (--dl-resume-from) and wrote none of its own.
  EXPECT_EQ(missing_checkpoint_warning(100, "4711", "/c/4711", std::nullopt, 100), "");
}

// Issue 12, item 3: the job comment is kept by slurmctld, so it still knows the
// checkpoint when the restart history was lost with the directory.
TEST(Restart, TheJobCommentRecordsTheCheckpointToo) {
  EXPECT_EQ(recorded_checkpoint({}, ""), std::nullopt);
  EXPECT_EQ(recorded_checkpoint({}, "dl: 2 GPUs as 2x1"), std::nullopt);
  EXPECT_EQ(recorded_checkpoint({}, "dl | REQUEUED step 57, ckpt 50 (3s ago): stop requested"), 50);
  EXPECT_EQ(recorded_checkpoint({0, 0, 40}, "dl: no GPUs | REQUEUED step 57, ckpt 50 (3s ago)"),
            50);
  EXPECT_EQ(recorded_checkpoint({0, 0, 60}, "dl: no GPUs | REQUEUED step 57, ckpt 50 (3s ago)"),
            60);
  EXPECT_EQ(recorded_checkpoint({0, 0, 60}, "dl | RUNNING step 5, no checkpoint yet"), 60);
}

// Issue 16, item 8: a dlrun installed with DESTDIR (or copied with its tree) loads the
// checkpoint library installed beside it, not one that may be missing at the real path.
TEST(ModulePaths, BuildTreeThenSameRootThenInstalledPath) {
  using V = std::vector<std::string>;
  EXPECT_EQ(module_paths("/src/build/launcher", "/usr/bin", "/usr/lib/x/slurm-dl", "m.so"),
            (V{"/src/build/launcher/.libs/m.so", "/usr/lib/x/slurm-dl/m.so"}));
  EXPECT_EQ(module_paths("/tmp/root/usr/bin", "/usr/bin", "/usr/lib/x/slurm-dl", "m.so"),
            (V{"/tmp/root/usr/bin/.libs/m.so", "/tmp/root/usr/lib/x/slurm-dl/m.so",
               "/usr/lib/x/slurm-dl/m.so"}));
  // Installed for real: the root is "/" itself, nothing to add.
  EXPECT_EQ(module_paths("/usr/bin", "/usr/bin", "/usr/lib/x/slurm-dl", "m.so"),
            (V{"/usr/bin/.libs/m.so", "/usr/lib/x/slurm-dl/m.so"}));
  // Only a whole trailing component matches.
  EXPECT_EQ(module_paths("/opt/myusr/bin", "/usr/bin", "/usr/lib/m", "m.so"),
            (V{"/opt/myusr/bin/.libs/m.so", "/usr/lib/m/m.so"}));
  EXPECT_EQ(module_paths("/opt/bin", "", "/usr/lib/m", "m.so"),
            (V{"/opt/bin/.libs/m.so", "/usr/lib/m/m.so"}));
}

}  // namespace
}  // namespace dl
