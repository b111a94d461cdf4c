#include "launcher/watchdog.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "launcher/control.h"

namespace dl {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

const Steady::time_point t0{};

TEST(Watchdog, QuietUntilEveryWatchedRankIsIdleForTheLimit) {
  Watchdog w(10s, 3);
  EXPECT_FALSE(w.next_check());  // nobody reported a step: nobody is watched
  EXPECT_FALSE(w.check(t0 + 1h));
  w.report(0, 5, t0);
  w.report(1, 5, t0);
  w.report(2, 4, t0);
  w.report(0, 6, t0 + 2s);
  w.report(1, 6, t0 + 2s);
  EXPECT_EQ(*w.next_check(), t0 + 12s);
  EXPECT_FALSE(w.check(t0 + 11s));  // ranks 0 and 1 stepped 9 s ago: not yet
  const auto hang = w.check(t0 + 12s);
  ASSERT_TRUE(hang);
  ASSERT_EQ(hang->stalled.size(), 1u);
  EXPECT_EQ(hang->stalled[0].rank, 2u);
  EXPECT_EQ(hang->stalled[0].step, 4);
  EXPECT_EQ(hang->stalled[0].idle, 12s);
  ASSERT_EQ(hang->ranks.size(), 3u);
  EXPECT_EQ(hang->ranks[0].step, 6);
  EXPECT_EQ(hang->ranks[1].idle, 10s);
}

TEST(Watchdog, APeerThatKeepsSteppingIsNoHang) {
  Watchdog w(10s, 2);
  w.report(0, 1, t0);
  w.report(1, 1, t0);
  for (int s = 2; s < 30; ++s) w.report(0, s, t0 + std::chrono::seconds(s));
  EXPECT_FALSE(w.check(t0 + 30s));
}

TEST(Watchdog, TheSameStepAgainIsNoProgress) {
  Watchdog w(10s, 1);
  w.report(0, 3, t0);
  w.report(0, 3, t0 + 9s);
  EXPECT_TRUE(w.check(t0 + 10s));
}

TEST(Watchdog, BusyInACheckpointRoundIsNoStall) {
  Watchdog w(10s, 2);
  w.report(0, 3, t0);
  w.report(1, 3, t0);
  w.busy(0, t0 + 8s);  // saving a checkpoint at step 3
  w.busy(1, t0 + 9s);
  w.busy(1, t0 + 2s);  // an older word changes nothing
  EXPECT_FALSE(w.check(t0 + 17s));
  const auto hang = w.check(t0 + 19s);
  ASSERT_TRUE(hang);
  EXPECT_EQ(hang->stalled[0].rank, 0u);
  EXPECT_EQ(hang->stalled[0].idle, 11s);
}

TEST(Watchdog, BusyBeforeTheFirstStepWatchesNothing) {
  Watchdog w(10s, 1);
  w.busy(0, t0);
  EXPECT_FALSE(w.next_check());
}

TEST(Watchdog, OnTiesTheLongestIdleStalledFirst) {
  Watchdog w(10s, 4);
  w.report(0, 7, t0 + 3s);
  w.report(1, 7, t0 + 1s);
  w.report(2, 7, t0 + 2s);
  w.report(3, 8, t0 + 4s);
  const auto hang = w.check(t0 + 20s);
  ASSERT_TRUE(hang);
  ASSERT_EQ(hang->stalled.size(), 3u);
  EXPECT_EQ(hang->stalled[0].rank, 1u);
  EXPECT_EQ(hang->stalled[1].rank, 2u);
  EXPECT_EQ(hang->stalled[2].rank, 0u);
}

TEST(Watchdog, RanksWithoutStepsOrExitedAreNotWatched) {
  Watchdog w(10s, 3);
  w.report(0, 9, t0);
  w.report(1, 2, t0);
  w.exited(1);  // finished early, at a lower step: not the culprit
  // rank 2 never reports a step (no client API)
  const auto hang = w.check(t0 + 10s);
  ASSERT_TRUE(hang);
  ASSERT_EQ(hang->stalled.size(), 1u);
  EXPECT_EQ(hang->stalled[0].rank, 0u);
  EXPECT_EQ(hang->ranks[1].step, -1);
  EXPECT_EQ(hang->ranks[2].step, -1);
  w.exited(0);
  EXPECT_FALSE(w.check(t0 + 1h));
}

TEST(Watchdog, IgnoresUnknownRanksAndNegativeSteps) {
  Watchdog w(10s, 1);
  w.report(5, 1, t0);
  w.report(0, -2, t0);
  EXPECT_FALSE(w.next_check());
}

TEST(Watchdog, DescribesTheVerdictAndEveryRank) {
  Watchdog w(60s, 3);
  w.report(0, 12, t0);
  w.report(1, 11, t0);
  w.report(2, 11, t0 + 1s);
  const auto hang = w.check(t0 + 61s);
  ASSERT_TRUE(hang);
  EXPECT_EQ(describe_hang(*hang, {"n0", "n1", ""}, 60s),
            "hang: no rank reported a step for 60s (--dl-watchdog); rank 1 on n1 stalled "
            "first, at step 11\n"
            "also stalled at step 11: 2@?\n"
            "rank node last-step idle-seconds\n"
            "0 n0 12 61.0\n"
            "1 n1 11 61.0\n"
            "2 ? 11 60.0\n");
}

TEST(Watchdog, CollectiveTimeoutsOutlastTheWatchdog) {
  EXPECT_GT(collective_timeout_for(60s), 60s);
  const auto d = collective_watchdog_defaults(60s);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0], std::make_pair(std::string("DL_COLLECTIVE_TIMEOUT"), std::string("420")));
  EXPECT_EQ(d[2].first, "TORCH_NCCL_ASYNC_ERROR_HANDLING");
}

TEST(WatchdogMessages, RoundTrip) {
  Message p;
  p.kind = MsgKind::progress;
  p.step = 42;
  p.seq = 750;
  p.flag = true;
  EXPECT_EQ(format_message(p), "PROGRESS 42 750 1\n");
  EXPECT_EQ(parse_message("PROGRESS 42 750 0").step, 42);
  EXPECT_EQ(parse_message("PROGRESS 42 750 0").seq, 750u);
  EXPECT_TRUE(parse_message("PROGRESS 42 750 1").flag);
  Message t;
  t.kind = MsgKind::trace;
  t.text = "#0  0x1 in hang_here () at x.cc:3";
  EXPECT_EQ(parse_message(format_message(t).substr(0, format_message(t).size() - 1)).text, t.text);
  EXPECT_EQ(parse_message("TRACE ").text, "");
  const Message d = parse_message("TRACED 1 gdb timed out after 30s");
  EXPECT_EQ(d.kind, MsgKind::traced);
  EXPECT_TRUE(d.flag);
  EXPECT_EQ(d.text, "gdb timed out after 30s");
  EXPECT_EQ(parse_message("DUMP rank 1 stalled").text, "rank 1 stalled");
  EXPECT_THROW(parse_message("PROGRESS x 1 0"), SystemError);
  EXPECT_THROW(parse_message("PROGRESS 1 1"), SystemError);
  EXPECT_THROW(parse_message("TRACED 2 x"), SystemError);
}

}  // namespace
}  // namespace dl
