// The searcher state machine (exp/searcher.h): rung math, ASHA's promotion rule, the
// baselines, failures and retries, pausing one trial (its slot given back, resumed within
// max_concurrent_trials), and that replaying the same events gives the same state.
#include "exp/searcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "core/error.h"

namespace dl::exp::search {
namespace {

Config asha(int trials, int concurrent, double divisor, int rungs, std::int64_t budget) {
  Config c;
  c.algorithm = Algorithm::asha;
  c.space = {{"lr", ParamKind::log_real, 1e-4, 1.0, {}, 3},
             {"layers", ParamKind::integer, 1, 4, {}, 3},
             {"act", ParamKind::categorical, 0, 0, {"relu", "tanh"}, 3}};
  c.seed = 7;
  c.max_trials = trials;
  c.max_concurrent_trials = concurrent;
  c.divisor = divisor;
  c.max_rungs = rungs;
  c.budget = budget;
  return c;
}

// Finishes `op`'s run with metric `value` (reported at the last step of its budget).
std::vector<Op> finish(Searcher& s, const Op& op, double value) {
  s.handle({Event::Kind::reported, op.trial, op.budget - 1, value, ""});
  return s.handle({Event::Kind::finished, op.trial, 0, 0, ""});
}

std::vector<Op> of_kind(const std::vector<Op>& ops, Op::Kind k) {
  std::vector<Op> out;
  for (const auto& o : ops) {
    if (o.kind == k) out.push_back(o);
  }
  return out;
}

TEST(RungBudgets, DivideTheBudgetByTheDivisorPerRung) {
  EXPECT_EQ(rung_budgets(asha(8, 2, 2, 3, 8)), (std::vector<std::int64_t>{2, 4, 8}));
  EXPECT_EQ(rung_budgets(asha(8, 2, 4, 3, 64)), (std::vector<std::int64_t>{4, 16, 64}));
  EXPECT_EQ(rung_budgets(asha(8, 2, 3, 4, 100)), (std::vector<std::int64_t>{4, 11, 33, 100}));
}

TEST(RungBudgets, NoMoreRungsThanTheBudgetCanBeDividedInto) {
  // 4 steps with divisor 2 divide twice (1, 2, 4), whatever max_rungs says.
  EXPECT_EQ(rung_budgets(asha(8, 2, 2, 10, 4)), (std::vector<std::int64_t>{1, 2, 4}));
  EXPECT_EQ(rung_budgets(asha(8, 2, 4, 5, 1)), (std::vector<std::int64_t>{1}));
  Config r = asha(8, 2, 2, 3, 8);
  r.algorithm = Algorithm::random;
  EXPECT_EQ(rung_budgets(r), (std::vector<std::int64_t>{8}));
}

TEST(RungBudgets, TheDefaultsStartAtAnEighthOfTheBudget) {
  Config c;  // divisor 2, 4 rungs: bench/search's choice on its tuning shapes
  c.budget = 81;
  EXPECT_EQ(rung_budgets(c), (std::vector<std::int64_t>{10, 20, 41, 81}));
  EXPECT_EQ(c.asha_mode, AshaMode::promotion);
}

TEST(Validate, NamesTheField) {
  Config c = asha(8, 2, 1, 3, 8);
  EXPECT_THROW(
      {
        try {
          validate(c);
        } catch (const InputError& e) {
          EXPECT_STREQ(e.what(), "searcher.divisor: expected a number > 1");
          throw;
        }
      },
      InputError);
  c = asha(0, 2, 2, 3, 8);
  EXPECT_THROW(validate(c), InputError);
  c = asha(8, 2, 2, 3, 8);
  c.space[0].low = 0;  // log scale needs a positive lower end
  EXPECT_THROW(validate(c), InputError);
}

TEST(Sampling, SeededAndWithinTheSpace) {
  const Config c = asha(8, 2, 2, 3, 8);
  Rng a(42), b(42), other(43);
  std::set<std::string> acts;
  for (int i = 0; i < 200; ++i) {
    const auto x = sample(c.space, a);
    EXPECT_EQ(x, sample(c.space, b));
    const double lr = x["lr"].get<double>();
    EXPECT_GE(lr, 1e-4);
    EXPECT_LE(lr, 1.0);
    EXPECT_TRUE(x["layers"].is_number_integer());
    EXPECT_GE(x["layers"].get<int>(), 1);
    EXPECT_LE(x["layers"].get<int>(), 4);
    acts.insert(x["act"].get<std::string>());
  }
  EXPECT_EQ(acts, (std::set<std::string>{"relu", "tanh"}));
  EXPECT_NE(sample(c.space, a), sample(c.space, other));
  // The numbers themselves are fixed (splitmix64), so a search is the same everywhere.
  Rng fixed(0);
  EXPECT_EQ(fixed.next(), 0xE220A8397B1DCDAFull);
}

TEST(Grid, EveryCombinationInOrder) {
  std::vector<Param> space = {{"a", ParamKind::integer, 1, 2, {}, 3},
                              {"lr", ParamKind::log_real, 0.001, 0.1, {}, 3}};
  const auto g = grid(space, 100);
  ASSERT_EQ(g.size(), 6u);
  EXPECT_EQ(g[0]["a"], 1);
  EXPECT_NEAR(g[1]["lr"].get<double>(), 0.01, 1e-12);
  EXPECT_EQ(g[5]["a"], 2);
  EXPECT_EQ(grid(space, 4).size(), 4u);
}

TEST(Asha, StartsMaxConcurrentTrialsAtTheFirstRung) {
  Searcher s(asha(8, 3, 2, 3, 8));
  const auto ops = s.start();
  ASSERT_EQ(ops.size(), 3u);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(ops[i].kind, Op::Kind::create);
    EXPECT_EQ(ops[i].index, static_cast<std::int64_t>(i));
    EXPECT_EQ(ops[i].budget, 2);
    EXPECT_EQ(ops[i].rung, 0);
  }
  EXPECT_EQ(ops[0].trial, "t001");
  EXPECT_TRUE(s.start().empty());  // once
}

TEST(Asha, PromotesTheTopOfARungOnlyOnceEnoughTrialsReachedIt) {
  Searcher s(asha(8, 1, 2, 3, 8));
  auto ops = s.start();
  ASSERT_EQ(ops.size(), 1u);
  // One trial at rung 0: the top half of one is nobody, so a new trial starts.
  ops = finish(s, ops[0], 5.0);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, Op::Kind::create);
  EXPECT_EQ(s.find("t001")->state, TrialState::waiting);
  // Two at rung 0: the better (t002, 3.0) is promoted, resuming with rung 1's budget.
  ops = finish(s, ops[0], 3.0);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, Op::Kind::resume);
  EXPECT_EQ(ops[0].trial, "t002");
  EXPECT_EQ(ops[0].budget, 4);
  EXPECT_EQ(ops[0].rung, 1);
  // t002 at rung 1 alone: nothing to promote there; rung 0 has had its top half
  // promoted, so a third trial starts.
  ops = finish(s, ops[0], 2.0);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, Op::Kind::create);
  EXPECT_EQ(ops[0].trial, "t003");
  // t003 scores 1.0: with three at rung 0 the top half is one trial, t003 the best,
  // so it is promoted; t001 waits on.
  ops = finish(s, ops[0], 1.0);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].trial, "t003");
  EXPECT_EQ(ops[0].kind, Op::Kind::resume);
  EXPECT_EQ(s.find("t001")->state, TrialState::waiting);
}

TEST(Asha, ModeMaxPromotesTheLargest) {
  Config c = asha(8, 1, 2, 2, 4);
  c.mode = Mode::max;
  Searcher s(c);
  auto ops = s.start();
  ops = finish(s, ops[0], 5.0);
  ops = finish(s, ops[0], 3.0);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, Op::Kind::resume);
  EXPECT_EQ(ops[0].trial, "t001");
}

TEST(AshaStopping, TheTopOfTheRungSoFarContinuesAtOnceTheRestStopForGood) {
  Config c = asha(8, 1, 2, 3, 8);
  c.asha_mode = AshaMode::stopping;
  Searcher s(c);
  auto ops = s.start();
  // The first trial at rung 0 is the top max(1, floor(1/2)) = 1 so far: it continues at
  // once with rung 1's budget (promotion mode would make it wait).
  ops = finish(s, ops[0], 5.0);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, Op::Kind::resume);
  EXPECT_EQ(ops[0].trial, "t001");
  EXPECT_EQ(ops[0].budget, 4);
  EXPECT_EQ(ops[0].rung, 1);
  EXPECT_EQ(ops[0].reason, "continued from rung 0 (place 1 of 1)");
  EXPECT_EQ(s.find("t001")->state, TrialState::running);
  // t001 at rung 1, alone there: on to rung 2.
  ops = finish(s, ops[0], 4.0);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].trial, "t001");
  EXPECT_EQ(ops[0].rung, 2);
  ops = finish(s, ops[0], 3.0);
  EXPECT_EQ(s.find("t001")->state, TrialState::completed);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, Op::Kind::create);
  EXPECT_EQ(ops[0].trial, "t002");
  // t002 is worse at rung 0 (6.0 against 5.0; top 1 of 2): stopped at once, never
  // waiting, and a new trial takes its slot.
  ops = finish(s, ops[0], 6.0);
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].kind, Op::Kind::stop);
  EXPECT_EQ(ops[0].trial, "t002");
  EXPECT_EQ(ops[0].reason, "stopped at rung 0 (place 2 of 2)");
  EXPECT_EQ(ops[1].kind, Op::Kind::create);
  EXPECT_EQ(ops[1].trial, "t003");
  EXPECT_EQ(s.find("t002")->state, TrialState::stopped);
  // t003 the best of three at rung 0 (top floor(3/2) = 1): continues; t002 stays stopped.
  ops = finish(s, ops[1], 1.0);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, Op::Kind::resume);
  EXPECT_EQ(ops[0].trial, "t003");
  EXPECT_EQ(ops[0].reason, "continued from rung 0 (place 1 of 3)");
  EXPECT_EQ(s.find("t002")->state, TrialState::stopped);
}

TEST(AshaStopping, AStoppedTrialIsNeverResumedLater) {
  // Promotion mode resumes a waiting trial once enough worse ones arrive; stopping mode
  // never does.
  for (const AshaMode m : {AshaMode::promotion, AshaMode::stopping}) {
    Config c = asha(4, 1, 2, 2, 4);
    c.asha_mode = m;
    Searcher s(c);
    auto ops = s.start();
    const std::vector<double> values = {1.0, 2.0, 9.0, 9.0};
    std::set<std::string> resumed;
    std::size_t next = 0;
    std::deque<Op> pending(ops.begin(), ops.end());
    while (!pending.empty()) {
      const Op op = pending.front();
      pending.pop_front();
      if (op.kind != Op::Kind::create && op.kind != Op::Kind::resume) continue;
      if (op.kind == Op::Kind::resume) resumed.insert(op.trial);
      const double v = op.rung == 0 ? values[next++] : 0.5;
      for (const auto& o : finish(s, op, v)) pending.push_back(o);
    }
    EXPECT_TRUE(s.complete());
    // t002 (2.0) ranked second of two when it arrived; with four values at rung 0 it is
    // in the top two.
    if (m == AshaMode::promotion) {
      EXPECT_EQ(resumed, (std::set<std::string>{"t001", "t002"}));
    } else {
      EXPECT_EQ(resumed, (std::set<std::string>{"t001"}));
      EXPECT_EQ(s.find("t002")->state, TrialState::stopped);
    }
  }
}

TEST(AshaStopping, ModeMaxContinuesTheLargest) {
  Config c = asha(8, 1, 2, 2, 4);
  c.mode = Mode::max;
  c.asha_mode = AshaMode::stopping;
  Searcher s(c);
  auto ops = s.start();
  ops = finish(s, ops[0], 5.0);  // continues (first)
  ops = finish(s, ops[0], 5.0);  // t001 completes; t002 starts
  ops = finish(s, ops[0], 7.0);  // larger is better: continues
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, Op::Kind::resume);
  EXPECT_EQ(ops[0].trial, "t002");
}

// Drives a whole search: every run finishes with value f(trial, rung) in op order.
struct SearchRun {
  std::vector<Op> all;
  std::vector<Event> events;
};
SearchRun drive(Searcher& s, const std::function<double(const Op&)>& f,
                const std::function<bool(const Op&)>& fails = nullptr) {
  SearchRun run;
  std::deque<Op> pending;
  for (auto& o : s.start()) {
    run.all.push_back(o);
    pending.push_back(o);
  }
  while (!pending.empty()) {
    const Op op = pending.front();
    pending.pop_front();
    if (op.kind != Op::Kind::create && op.kind != Op::Kind::resume) continue;
    std::vector<Event> evs;
    if (fails && fails(op)) {
      evs = {{Event::Kind::failed, op.trial, 0, 0, "exit code 1"}};
    } else {
      evs = {{Event::Kind::reported, op.trial, op.budget - 1, f(op), ""},
             {Event::Kind::finished, op.trial, 0, 0, ""}};
    }
    for (const auto& e : evs) {
      run.events.push_back(e);
      for (auto& o : s.handle(e)) {
        run.all.push_back(o);
        pending.push_back(o);
      }
    }
  }
  return run;
}

double quality(const Op& op) {
  // Deterministic, distinct per trial, improving with the rung.
  const int n = std::stoi(op.trial.substr(1));
  return std::fmod(n * 0.37, 1.0) + 1.0 / (op.rung + 1);
}

TEST(Asha, AWholeSearchEndsWithEveryTrialCompletedOrStopped) {
  Searcher s(asha(9, 3, 3, 3, 9));
  const SearchRun run = drive(s, quality);
  EXPECT_TRUE(s.complete());
  ASSERT_FALSE(run.all.empty());
  EXPECT_EQ(run.all.back().kind, Op::Kind::complete);
  EXPECT_EQ(of_kind(run.all, Op::Kind::create).size(), 9u);
  int completed = 0;
  for (const auto& t : s.trials()) {
    EXPECT_TRUE(t.state == TrialState::completed || t.state == TrialState::stopped) << t.id;
    if (t.state == TrialState::completed) ++completed;
  }
  // With divisor 3, a third of 9 reaches rung 1 and a third of those the top.
  EXPECT_EQ(completed, 1);
  EXPECT_EQ(of_kind(run.all, Op::Kind::resume).size(), 4u);
  // Op indices are consecutive.
  for (std::size_t i = 0; i < run.all.size(); ++i) {
    EXPECT_EQ(run.all[i].index, static_cast<std::int64_t>(i));
  }
  // The best trial is the one at the top rung.
  ASSERT_TRUE(s.best());
  EXPECT_EQ(s.find(*s.best())->state, TrialState::completed);
}

TEST(Asha, NeverRunsMoreThanMaxConcurrentTrials) {
  Searcher s(asha(20, 4, 2, 3, 8));
  auto ops = s.start();
  std::deque<Op> running(ops.begin(), ops.end());
  EXPECT_EQ(running.size(), 4u);
  while (!running.empty()) {
    const Op op = running.front();
    running.pop_front();
    for (const auto& o : finish(s, op, quality(op))) {
      if (o.kind == Op::Kind::create || o.kind == Op::Kind::resume) running.push_back(o);
    }
    EXPECT_LE(running.size(), 4u);
  }
  EXPECT_TRUE(s.complete());
}

TEST(Asha, ReplayingTheEventsGivesTheSameStateAndOperations) {
  Searcher first(asha(12, 3, 2, 3, 8));
  const SearchRun run = drive(first, quality, [](const Op& op) { return op.trial == "t004"; });
  // A restarted driver: a new searcher, the recorded events in order.
  for (std::size_t cut : {std::size_t{0}, run.events.size() / 2, run.events.size()}) {
    Searcher again(asha(12, 3, 2, 3, 8));
    std::vector<Op> ops = again.start();
    for (std::size_t i = 0; i < cut; ++i) {
      for (auto& o : again.handle(run.events[i])) ops.push_back(o);
    }
    ASSERT_LE(ops.size(), run.all.size());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      EXPECT_EQ(ops[i].index, run.all[i].index);
      EXPECT_EQ(ops[i].trial, run.all[i].trial);
      EXPECT_EQ(ops[i].kind, run.all[i].kind);
      EXPECT_EQ(ops[i].hparams, run.all[i].hparams);
      EXPECT_EQ(ops[i].budget, run.all[i].budget);
    }
    if (cut == run.events.size()) {
      EXPECT_EQ(again.snapshot(), first.snapshot());
    }
  }
}

TEST(AshaStopping, ReplayingTheEventsGivesTheSameStateAndOperations) {
  Config c = asha(12, 3, 2, 3, 8);
  c.asha_mode = AshaMode::stopping;
  Searcher first(c);
  const SearchRun run = drive(first, quality, [](const Op& op) { return op.trial == "t004"; });
  EXPECT_TRUE(first.complete());
  EXPECT_FALSE(of_kind(run.all, Op::Kind::stop).empty());
  const auto resumes = of_kind(run.all, Op::Kind::resume);
  EXPECT_TRUE(std::any_of(resumes.begin(), resumes.end(), [](const Op& o) {
    return o.reason.rfind("continued from rung", 0) == 0;
  }));
  for (std::size_t cut : {std::size_t{0}, run.events.size() / 3, run.events.size()}) {
    Searcher again(c);
    std::vector<Op> ops = again.start();
    for (std::size_t i = 0; i < cut; ++i) {
      for (auto& o : again.handle(run.events[i])) ops.push_back(o);
    }
    ASSERT_LE(ops.size(), run.all.size());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      EXPECT_EQ(ops[i].index, run.all[i].index);
      EXPECT_EQ(ops[i].trial, run.all[i].trial);
      EXPECT_EQ(ops[i].kind, run.all[i].kind);
      EXPECT_EQ(ops[i].budget, run.all[i].budget);
      EXPECT_EQ(ops[i].reason, run.all[i].reason);
    }
    if (cut == run.events.size()) {
      EXPECT_EQ(again.snapshot(), first.snapshot());
    }
  }
}

TEST(Failures, RetriedWithinTheRestartBudgetThenFailedAndTheSearchGoesOn) {
  Config c = asha(4, 1, 2, 2, 4);
  c.max_restarts = 2;
  Searcher s(c);
  auto ops = s.start();
  ASSERT_EQ(ops[0].trial, "t001");
  for (int i = 1; i <= 2; ++i) {
    ops = s.handle({Event::Kind::failed, "t001", 0, 0, "exit code 1"});
    ASSERT_EQ(ops.size(), 1u);
    EXPECT_EQ(ops[0].kind, Op::Kind::resume);  // from its own checkpoint, same budget
    EXPECT_EQ(ops[0].trial, "t001");
    EXPECT_EQ(ops[0].budget, 2);
    EXPECT_EQ(ops[0].reason, "retry " + std::to_string(i) + " of 2 after: exit code 1");
  }
  ops = s.handle({Event::Kind::failed, "t001", 0, 0, "exit code 1"});
  EXPECT_EQ(s.find("t001")->state, TrialState::failed);
  EXPECT_EQ(s.find("t001")->reason, "exit code 1");
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, Op::Kind::create);  // the search goes on
  EXPECT_EQ(ops[0].trial, "t002");
}

TEST(Failures, FinishingWithoutTheMetricIsAFailure) {
  Config c = asha(2, 1, 2, 2, 4);
  c.max_restarts = 0;
  Searcher s(c);
  s.start();
  const auto ops = s.handle({Event::Kind::finished, "t001", 0, 0, ""});
  EXPECT_EQ(s.find("t001")->state, TrialState::failed);
  EXPECT_EQ(s.find("t001")->reason, "finished without reporting 'loss'");
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].trial, "t002");
}

TEST(Events, StaleOrUnknownChangeNothing) {
  Searcher s(asha(4, 1, 2, 2, 4));
  auto ops = s.start();
  const auto before = s.snapshot();
  EXPECT_TRUE(s.handle({Event::Kind::finished, "t999", 0, 0, ""}).empty());
  EXPECT_TRUE(s.handle({Event::Kind::started, "t001", 0, 0, ""}).empty());
  // A report past the run's budget belongs to no rung of this run.
  EXPECT_TRUE(s.handle({Event::Kind::reported, "t001", 99, 1.0, ""}).empty());
  EXPECT_EQ(s.snapshot(), before);
  finish(s, ops[0], 1.0);
  const auto after = s.snapshot();
  EXPECT_TRUE(s.handle({Event::Kind::finished, "t001", 0, 0, ""}).empty());  // already waiting
  EXPECT_EQ(s.snapshot(), after);
}

TEST(UserStop, ARunningTrialIsStoppedAndItsSlotGoesToANewTrial) {
  Searcher s(asha(4, 1, 2, 2, 4));
  auto ops = s.start();
  ASSERT_EQ(ops[0].trial, "t001");
  s.handle({Event::Kind::reported, "t001", 0, 0.5, ""});
  ops = s.handle({Event::Kind::stopped, "t001", 0, 0, "stopped by dl-search stop"});
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].kind, Op::Kind::stop);
  EXPECT_EQ(ops[0].trial, "t001");
  EXPECT_EQ(ops[0].reason, "stopped by dl-search stop");
  EXPECT_EQ(ops[1].kind, Op::Kind::create);  // the search goes on
  EXPECT_EQ(ops[1].trial, "t002");
  EXPECT_EQ(s.find("t001")->state, TrialState::stopped);
  EXPECT_TRUE(s.find("t001")->rung_values.empty());
  // Its job's end changes nothing any more, nor does a second stop.
  const auto after = s.snapshot();
  EXPECT_TRUE(s.handle({Event::Kind::failed, "t001", 0, 0, "cancelled"}).empty());
  EXPECT_TRUE(s.handle({Event::Kind::stopped, "t001", 0, 0, "again"}).empty());
  EXPECT_EQ(s.snapshot(), after);
}

TEST(UserStop, AWaitingTrialKeepsItsRungValueAndIsNeverPromoted) {
  Searcher s(asha(3, 1, 2, 2, 4));
  auto ops = s.start();
  ops = finish(s, ops[0], 1.0);  // t001 waits at rung 0 (alone: top half of one is none)
  ASSERT_EQ(ops[0].trial, "t002");
  EXPECT_EQ(s.find("t001")->state, TrialState::waiting);
  EXPECT_TRUE(s.handle({Event::Kind::stopped, "t001", 0, 0, "by hand"}).size() == 1u);
  EXPECT_EQ(s.find("t001")->state, TrialState::stopped);
  EXPECT_EQ(s.find("t001")->rung_values.at(0), 1.0);
  // t002 worse than t001: t001 would have been promoted; stopped, nobody is.
  ops = finish(s, ops[0], 2.0);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, Op::Kind::create);
  EXPECT_EQ(ops[0].trial, "t003");
  for (const auto& o : finish(s, ops[0], 3.0)) EXPECT_NE(o.trial, "t001");
  EXPECT_TRUE(s.complete());
  EXPECT_EQ(s.find("t001")->state, TrialState::stopped);
  EXPECT_EQ(s.find("t001")->reason, "by hand");
}

TEST(Random, EveryTrialRunsTheWholeBudget) {
  Config c = asha(5, 2, 2, 3, 8);
  c.algorithm = Algorithm::random;
  Searcher s(c);
  const SearchRun run = drive(s, quality);
  EXPECT_EQ(of_kind(run.all, Op::Kind::create).size(), 5u);
  EXPECT_TRUE(of_kind(run.all, Op::Kind::resume).empty());
  for (const auto& o : of_kind(run.all, Op::Kind::create)) EXPECT_EQ(o.budget, 8);
  for (const auto& t : s.trials()) EXPECT_EQ(t.state, TrialState::completed);
}

TEST(GridSearch, RunsEachPointOnce) {
  Config c = asha(100, 2, 2, 3, 8);
  c.algorithm = Algorithm::grid;
  c.space = {{"a", ParamKind::integer, 1, 3, {}, 3},
             {"b", ParamKind::categorical, 0, 0, {"x", "y"}, 3}};
  Searcher s(c);
  const SearchRun run = drive(s, quality);
  const auto created = of_kind(run.all, Op::Kind::create);
  ASSERT_EQ(created.size(), 6u);
  std::set<std::string> points;
  for (const auto& o : created) points.insert(o.hparams.dump());
  EXPECT_EQ(points.size(), 6u);
  EXPECT_TRUE(s.complete());
}

}  // namespace
// ---- pausing one trial (dl-search pause|resume EXP TRIAL) ----

Event ev(Event::Kind k, const std::string& trial) { return {k, trial, 0, 0, ""}; }

TEST(Pause, ARunningTrialKeepsItsSlotUntilItsJobIsHeldThenGivesItBack) {
  Searcher s(asha(4, 1, 2, 2, 4));
  auto ops = s.start();
  ASSERT_EQ(ops[0].trial, "t001");
  ops = s.handle(ev(Event::Kind::paused, "t001"));
  ASSERT_EQ(ops.size(), 1u);  // hold its job; no new trial while it is still on its GPUs
  EXPECT_EQ(ops[0].kind, Op::Kind::hold);
  EXPECT_EQ(ops[0].trial, "t001");
  EXPECT_EQ(s.find("t001")->pause, Pause::pausing);
  EXPECT_EQ(s.running(), 1);
  ops = s.handle(ev(Event::Kind::held, "t001"));
  ASSERT_EQ(ops.size(), 1u);  // off its GPUs: its slot goes to a new trial
  EXPECT_EQ(ops[0].kind, Op::Kind::create);
  EXPECT_EQ(ops[0].trial, "t002");
  EXPECT_EQ(s.find("t001")->pause, Pause::paused);
  EXPECT_EQ(s.find("t001")->state, TrialState::running);  // its run is not over
  EXPECT_EQ(s.running(), 1);
  // A second pause or held changes nothing.
  const auto before = s.snapshot();
  EXPECT_TRUE(s.handle(ev(Event::Kind::paused, "t001")).empty());
  EXPECT_TRUE(s.handle(ev(Event::Kind::held, "t001")).empty());
  EXPECT_EQ(s.snapshot(), before);
}

TEST(Pause, AResumedTrialWaitsForAFreeSlotThenGoesBeforeAnyPromotionOrNewTrial) {
  Searcher s(asha(4, 1, 2, 2, 4));
  auto ops = s.start();
  s.handle(ev(Event::Kind::paused, "t001"));
  ops = s.handle(ev(Event::Kind::held, "t001"));
  ASSERT_EQ(ops[0].trial, "t002");
  const Op t002 = ops[0];
  // Resumed while t002 has the only slot: it waits, its job stays held.
  EXPECT_TRUE(s.handle(ev(Event::Kind::resumed, "t001")).empty());
  EXPECT_EQ(s.find("t001")->pause, Pause::queued);
  EXPECT_EQ(s.queue(), std::vector<std::string>{"t001"});
  EXPECT_EQ(s.running(), 1);
  // t002 ends its rung: t001 gets the slot, not a new trial (nor a promotion).
  ops = finish(s, t002, 1.0);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, Op::Kind::release);
  EXPECT_EQ(ops[0].trial, "t001");
  EXPECT_EQ(ops[0].reason, "resumed (a slot became free)");
  EXPECT_EQ(s.find("t001")->pause, Pause::none);
  EXPECT_TRUE(s.queue().empty());
  EXPECT_EQ(s.running(), 1);
  // Its run goes on where it was (the same run op): it finishes its rung.
  ops = s.handle({Event::Kind::reported, "t001", 1, 0.5, ""});
  ops = s.handle(ev(Event::Kind::finished, "t001"));
  ASSERT_FALSE(ops.empty());
  EXPECT_EQ(ops[0].kind, Op::Kind::resume);  // t001 (0.5) tops rung 0 of two
  EXPECT_EQ(ops[0].trial, "t001");
}

TEST(Pause, AResumedTrialWithASlotFreeIsReleasedAtOnce) {
  Searcher s(asha(2, 2, 2, 2, 4));
  auto ops = s.start();
  ASSERT_EQ(ops.size(), 2u);
  s.handle(ev(Event::Kind::paused, "t001"));
  EXPECT_TRUE(s.handle(ev(Event::Kind::held, "t001")).empty());  // max_trials reached
  EXPECT_EQ(s.running(), 1);
  ops = s.handle(ev(Event::Kind::resumed, "t001"));
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, Op::Kind::release);
  EXPECT_EQ(ops[0].reason, "resumed (a slot was free)");
  EXPECT_EQ(s.running(), 2);
}

TEST(Pause, ResumedWhileItsHoldIsUnderWayItKeepsItsSlotAndIsReleasedOnceHeld) {
  Searcher s(asha(4, 1, 2, 2, 4));
  s.start();
  s.handle(ev(Event::Kind::paused, "t001"));
  EXPECT_TRUE(s.handle(ev(Event::Kind::resumed, "t001")).empty());
  EXPECT_EQ(s.find("t001")->pause, Pause::unpausing);
  EXPECT_EQ(s.running(), 1);
  const auto ops = s.handle(ev(Event::Kind::held, "t001"));
  ASSERT_EQ(ops.size(), 1u);  // no new trial in between: the slot stays its own
  EXPECT_EQ(ops[0].kind, Op::Kind::release);
  EXPECT_EQ(ops[0].trial, "t001");
  EXPECT_EQ(s.find("t001")->pause, Pause::none);
}

TEST(Pause, ARunThatEndsBeforeItsHoldLeavesTheTrialPausedAtItsRung) {
  Searcher s(asha(4, 1, 2, 2, 4));
  auto ops = s.start();
  s.handle(ev(Event::Kind::paused, "t001"));
  ops = finish(s, ops[0], 1.0);  // the rung ended before the hold reached the job
  EXPECT_EQ(s.find("t001")->state, TrialState::waiting);
  EXPECT_EQ(s.find("t001")->pause, Pause::paused);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].trial, "t002");
}

TEST(Pause, APausedWaitingTrialIsNotPromotedAndTheSearchWaitsForIt) {
  Searcher s(asha(4, 1, 2, 2, 4));
  auto ops = s.start();
  ops = finish(s, ops[0], 1.0);  // t001 waits at rung 0; t002 starts
  EXPECT_TRUE(s.handle(ev(Event::Kind::paused, "t001")).empty());  // no job: no hold
  EXPECT_EQ(s.find("t001")->pause, Pause::paused);
  ops = finish(s, ops[0], 2.0);  // t001 would be promoted (top 1 of 2); paused, it is not
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, Op::Kind::create);
  EXPECT_EQ(ops[0].trial, "t003");
  ops = finish(s, ops[0], 3.0);
  ASSERT_EQ(ops[0].trial, "t004");
  ops = finish(s, ops[0], 4.0);  // top 2 of 4: t001 (paused), then t002
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, Op::Kind::resume);
  EXPECT_EQ(ops[0].trial, "t002");
  ops = finish(s, ops[0], 1.5);  // t002 completes; nothing runs, t001 is paused
  EXPECT_TRUE(ops.empty());
  EXPECT_FALSE(s.complete());
  ops = s.handle(ev(Event::Kind::resumed, "t001"));
  ASSERT_EQ(ops.size(), 1u);  // eligible again: promoted
  EXPECT_EQ(ops[0].kind, Op::Kind::resume);
  EXPECT_EQ(ops[0].trial, "t001");
  ops = finish(s, ops[0], 0.5);
  ASSERT_FALSE(ops.empty());
  EXPECT_EQ(ops.back().kind, Op::Kind::complete);
  EXPECT_EQ(*s.best(), "t001");
}

TEST(Pause, StoppingAQueuedOrPausedTrialTakesItOutOfTheQueue) {
  Searcher s(asha(6, 1, 2, 2, 4));
  s.start();
  s.handle(ev(Event::Kind::paused, "t001"));
  s.handle(ev(Event::Kind::held, "t001"));
  s.handle(ev(Event::Kind::resumed, "t001"));
  ASSERT_EQ(s.queue(), std::vector<std::string>{"t001"});
  const auto ops = s.handle({Event::Kind::stopped, "t001", 0, 0, "by hand"});
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, Op::Kind::stop);
  EXPECT_TRUE(s.queue().empty());
  EXPECT_EQ(s.find("t001")->pause, Pause::none);
  EXPECT_EQ(s.running(), 1);  // t002 only
}

TEST(Pause, AFailedPausedRunIsRetriedHeldWithoutASlot) {
  Config c = asha(4, 1, 2, 2, 4);
  c.max_restarts = 1;
  Searcher s(c);
  s.start();
  s.handle(ev(Event::Kind::paused, "t001"));
  // Its job failed while the hold was under way: retried (submitted held), off its GPUs.
  const auto ops = s.handle({Event::Kind::failed, "t001", 0, 0, "exit code 1"});
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].kind, Op::Kind::resume);
  EXPECT_EQ(ops[0].trial, "t001");
  EXPECT_EQ(ops[1].kind, Op::Kind::create);
  EXPECT_EQ(ops[1].trial, "t002");
  EXPECT_EQ(s.find("t001")->pause, Pause::paused);
  EXPECT_EQ(s.running(), 1);
}

// A simulated cluster with users pausing and resuming trials at random: the trials whose
// jobs may run on their GPUs (not held, or their hold not yet taken effect) never exceed
// max_concurrent_trials; every trial ends; replaying the events gives the same operations
// and state.
TEST(Pause, RandomPausesAndResumesNeverRunMoreThanMaxConcurrentTrials) {
  for (std::uint32_t seed = 1; seed <= 60; ++seed) {
    for (auto mode : {AshaMode::promotion, AshaMode::stopping}) {
      Config c = asha(10, 3, 2, 3, 8);
      c.asha_mode = mode;
      c.max_restarts = 1;
      Searcher s(c);
      std::mt19937 rng(seed);
      std::map<std::string, bool> on_gpu;  // trial -> its job runs
      std::map<std::string, Op> run_of;    // trial -> its current run op
      std::vector<Event> events;
      std::vector<Op> all;
      int most = 0;
      auto take = [&](const std::vector<Op>& ops) {
        for (const auto& op : ops) {
          all.push_back(op);
          const Trial* t = s.find(op.trial);
          if (op.kind == Op::Kind::create || op.kind == Op::Kind::resume) {
            run_of[op.trial] = op;
            // The driver submits --hold while the trial is paused, pausing or queued.
            on_gpu[op.trial] = t->pause == Pause::none || t->pause == Pause::unpausing;
          } else if (op.kind == Op::Kind::release) {
            on_gpu[op.trial] = true;
          } else if (op.kind == Op::Kind::stop) {
            on_gpu[op.trial] = false;
          }
        }
        int n = 0;
        for (const auto& [id, on] : on_gpu) n += on;
        most = std::max(most, n);
        ASSERT_LE(n, c.max_concurrent_trials) << "seed " << seed;
        ASSERT_LE(s.running(), c.max_concurrent_trials) << "seed " << seed;
        for (const auto& [id, on] : on_gpu) {
          if (on) {
            ASSERT_EQ(s.find(id)->state, TrialState::running) << id;
          }
        }
      };
      auto feed = [&](const Event& e) {
        events.push_back(e);
        take(s.handle(e));
      };
      take(s.start());
      for (int step = 0; step < 2000 && !s.complete(); ++step) {
        std::vector<std::string> live;
        for (const auto& t : s.trials()) {
          if (t.state == TrialState::running || t.state == TrialState::waiting)
            live.push_back(t.id);
        }
        ASSERT_FALSE(live.empty()) << "seed " << seed;
        const std::string id = live[rng() % live.size()];
        const Trial t = *s.find(id);
        const bool late = step > 400;  // then only resume and finish, to end the search
        switch (rng() % 6) {
          case 0:  // pause
            if (!late && (t.pause == Pause::none || t.pause == Pause::unpausing ||
                          t.pause == Pause::queued)) {
              feed(ev(Event::Kind::paused, id));
            }
            break;
          case 1:  // the hold takes effect: the job is off its GPUs
            if (t.pause == Pause::pausing || t.pause == Pause::unpausing) {
              on_gpu[id] = false;
              feed(ev(Event::Kind::held, id));
            }
            break;
          case 2:  // resume
            if (t.pause == Pause::pausing || t.pause == Pause::paused) {
              feed(ev(Event::Kind::resumed, id));
            }
            break;
          case 3:  // the run fails
            if (!late && on_gpu[id]) {
              on_gpu[id] = false;
              feed({Event::Kind::failed, id, 0, 0, "exit code 1"});
            }
            break;
          default:  // the run ends its rung
            if (on_gpu[id]) {
              const Op op = run_of.at(id);
              on_gpu[id] = false;
              const double v = std::fmod(std::stoi(id.substr(1)) * 0.37, 1.0) + 1.0 / (op.rung + 1);
              feed({Event::Kind::reported, id, op.budget - 1, v, ""});
              feed(ev(Event::Kind::finished, id));
            }
        }
      }
      ASSERT_TRUE(s.complete()) << "seed " << seed;
      EXPECT_EQ(most, c.max_concurrent_trials) << "seed " << seed;
      for (const auto& t : s.trials()) {
        EXPECT_TRUE(t.state == TrialState::completed || t.state == TrialState::stopped ||
                    t.state == TrialState::failed)
            << t.id;
        EXPECT_EQ(t.pause, Pause::none) << t.id;
      }
      // A restarted driver replays the same events into the same operations and state.
      Searcher again(c);
      std::vector<Op> ops = again.start();
      for (const auto& e : events) {
        for (auto& o : again.handle(e)) ops.push_back(o);
      }
      ASSERT_EQ(ops.size(), all.size());
      for (std::size_t i = 0; i < ops.size(); ++i) {
        EXPECT_EQ(ops[i].kind, all[i].kind);
        EXPECT_EQ(ops[i].trial, all[i].trial);
        EXPECT_EQ(ops[i].index, all[i].index);
      }
      EXPECT_EQ(again.snapshot(), s.snapshot());
    }
  }
}

// ---- in-job continuation (continue_in_job) ----

namespace {

// Ends `op`'s rung while its job still runs, waiting for the decision (in_job).
std::vector<Op> finish_in_job(Searcher& s, const Op& op, double value) {
  s.handle({Event::Kind::reported, op.trial, op.budget - 1, value, ""});
  Event e{Event::Kind::finished, op.trial, 0, 0, ""};
  e.in_job = true;
  return s.handle(e);
}

TEST(ContinueInJob, ThePromotionOfTheTrialWhoseJobEndedTheRungContinuesInThatJob) {
  Searcher s(asha(8, 1, 2, 3, 8));
  auto ops = s.start();
  // One trial at rung 0: the decision for its slot is a new trial, so its job ends.
  ops = finish_in_job(s, ops[0], 5.0);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, Op::Kind::create);
  EXPECT_FALSE(ops[0].in_job);
  // t002 is better: ASHA promotes it for the slot it frees, so its job goes on.
  ops = finish_in_job(s, ops[0], 3.0);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, Op::Kind::resume);
  EXPECT_EQ(ops[0].trial, "t002");
  EXPECT_EQ(ops[0].rung, 1);
  EXPECT_EQ(ops[0].budget, 4);
  EXPECT_TRUE(ops[0].in_job);
  EXPECT_EQ(s.find("t002")->state, TrialState::running);
  EXPECT_EQ(s.find("t002")->rung_values.at(0), 3.0);
  // At rung 1 alone: a new trial gets the slot; t002's job ends.
  ops = finish_in_job(s, ops[0], 2.0);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, Op::Kind::create);
  EXPECT_FALSE(ops[0].in_job);
}

TEST(ContinueInJob, ARungWhoseJobEndsRanksBeforeTheJobHasEnded) {
  Searcher s(asha(8, 2, 2, 3, 8));
  auto ops = s.start();
  ASSERT_EQ(ops.size(), 2u);
  const Op first = ops[0], second = ops[1];
  // t001 ends rung 0 alone: the decision for its slot is a new trial, so its job ends
  // (the driver's "end"); its value ranks the rung while that job is still exiting.
  Searcher what_if = s;
  ops = finish_in_job(what_if, first, 5.0);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, Op::Kind::create);
  s.handle({Event::Kind::reported, first.trial, first.budget - 1, 5.0, ""});
  EXPECT_TRUE(s.handle({Event::Kind::rung_done, first.trial, 0, 0, ""}).empty());
  EXPECT_EQ(s.find("t001")->state, TrialState::running);  // its slot is still taken
  EXPECT_EQ(s.find("t001")->rung_values.at(0), 5.0);
  // t002, better, ends rung 0 a moment later: 2 values, so it is promoted in its job.
  ops = finish_in_job(s, second, 3.0);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, Op::Kind::resume);
  EXPECT_EQ(ops[0].trial, "t002");
  EXPECT_TRUE(ops[0].in_job);
  EXPECT_EQ(ops[0].reason, "promoted from rung 0 (place 1 of 2)");
  // t001's job has ended: it waits at rung 0 and a new trial takes its slot.
  ops = s.handle({Event::Kind::finished, first.trial, 0, 0, ""});
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, Op::Kind::create);
  EXPECT_EQ(s.find("t001")->state, TrialState::waiting);
  EXPECT_EQ(s.find("t001")->rung_values.at(0), 5.0);
}

TEST(ContinueInJob, APromotionOfAnotherTrialIsANewJobAsBefore) {
  Searcher s(asha(8, 1, 2, 3, 8));
  auto ops = s.start();
  ops = finish_in_job(s, ops[0], 1.0);  // t001, alone: waits
  // t002 worse: the slot goes to t001's promotion, which resumes in a job of its own.
  ops = finish_in_job(s, ops[0], 3.0);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, Op::Kind::resume);
  EXPECT_EQ(ops[0].trial, "t001");
  EXPECT_FALSE(ops[0].in_job);
}

TEST(ContinueInJob, TheDecisionsAreThoseWithoutIt) {
  // The same events with and without in_job give the same operations and states; only
  // the in_job marks differ, and only on resumes of the trial that just ended its rung.
  for (const AshaMode m : {AshaMode::promotion, AshaMode::stopping}) {
    Config c = asha(12, 3, 2, 3, 8);
    c.asha_mode = m;
    Searcher plain(c);
    const SearchRun run = drive(plain, quality);
    Searcher in_job(c);
    std::vector<Op> ops = in_job.start();
    int marked = 0;
    for (Event e : run.events) {
      if (e.kind == Event::Kind::finished) e.in_job = true;
      const auto batch = in_job.handle(e);
      for (std::size_t i = 0; i < batch.size(); ++i) {
        const Op& o = batch[i];
        if (o.in_job) {
          ++marked;
          EXPECT_EQ(i, 0u);  // the decision for the slot the rung frees
          EXPECT_EQ(o.kind, Op::Kind::resume);
          EXPECT_EQ(o.trial, e.trial);
        }
        ops.push_back(o);
      }
    }
    EXPECT_GT(marked, 0);
    ASSERT_EQ(ops.size(), run.all.size());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      EXPECT_EQ(ops[i].index, run.all[i].index);
      EXPECT_EQ(ops[i].trial, run.all[i].trial);
      EXPECT_EQ(ops[i].kind, run.all[i].kind);
      EXPECT_EQ(ops[i].budget, run.all[i].budget);
      EXPECT_FALSE(run.all[i].in_job);
    }
    EXPECT_EQ(in_job.snapshot(), plain.snapshot());
  }
}

TEST(ContinueInJob, OffInTheFileNothingContinues) {
  Config c = asha(8, 1, 2, 3, 8);
  c.continue_in_job = false;
  Searcher s(c);
  auto ops = s.start();
  ops = finish_in_job(s, ops[0], 5.0);
  ops = finish_in_job(s, ops[0], 3.0);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].trial, "t002");
  EXPECT_EQ(ops[0].kind, Op::Kind::resume);
  EXPECT_FALSE(ops[0].in_job);
}

TEST(ContinueInJob, StoppingModeContinuesTheTopOfTheRungInItsJob) {
  Config c = asha(8, 1, 2, 3, 8);
  c.asha_mode = AshaMode::stopping;
  Searcher s(c);
  auto ops = s.start();
  ops = finish_in_job(s, ops[0], 5.0);  // continued from rung 0 at once
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, Op::Kind::resume);
  EXPECT_EQ(ops[0].rung, 1);
  EXPECT_TRUE(ops[0].in_job);
}

TEST(ContinueInJob, APausedTrialNeverContinuesInItsJob) {
  Config c = asha(8, 1, 2, 3, 8);
  c.asha_mode = AshaMode::stopping;
  Searcher s(c);
  auto ops = s.start();
  s.handle({Event::Kind::paused, "t001", 0, 0, "dl-search pause"});
  ops = finish_in_job(s, ops[0], 5.0);
  for (const auto& o : ops) EXPECT_FALSE(o.in_job);
}

TEST(ContinueInJob, ReplayingTheEventsMarksTheSameContinuations) {
  const Config c = asha(12, 3, 2, 3, 8);
  Searcher first(c);
  std::vector<Op> all = first.start();
  std::vector<Event> events;
  std::deque<Op> pending(all.begin(), all.end());
  while (!pending.empty()) {
    const Op op = pending.front();
    pending.pop_front();
    if (op.kind != Op::Kind::create && op.kind != Op::Kind::resume) continue;
    Event r{Event::Kind::reported, op.trial, op.budget - 1, quality(op), ""};
    Event f{Event::Kind::finished, op.trial, 0, 0, ""};
    f.in_job = true;
    for (const Event& e : {r, f}) {
      events.push_back(e);
      for (auto& o : first.handle(e)) {
        all.push_back(o);
        pending.push_back(o);
      }
    }
  }
  ASSERT_TRUE(first.complete());
  ASSERT_TRUE(std::any_of(all.begin(), all.end(), [](const Op& o) { return o.in_job; }));
  for (std::size_t cut : {events.size() / 2, events.size()}) {
    Searcher again(c);
    std::vector<Op> ops = again.start();
    for (std::size_t i = 0; i < cut; ++i) {
      for (auto& o : again.handle(events[i])) ops.push_back(o);
    }
    ASSERT_LE(ops.size(), all.size());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      EXPECT_EQ(ops[i].index, all[i].index);
      EXPECT_EQ(ops[i].in_job, all[i].in_job);
      EXPECT_EQ(ops[i].trial, all[i].trial);
    }
    if (cut == events.size()) {
      EXPECT_EQ(again.snapshot(), first.snapshot());
    }
  }
}

TEST(ContinueInJob, FitsOnlyWhenTheTimeLeftCoversTheStepsAndTheWarning) {
  EXPECT_TRUE(continuation_fits(100, 10, 5, 50));
  EXPECT_FALSE(continuation_fits(99, 10, 5, 50));
  EXPECT_FALSE(continuation_fits(-1, 10, 5, 50));    // time left unknown
  EXPECT_FALSE(continuation_fits(100, 10, -1, 50));  // step time unknown
  EXPECT_TRUE(continuation_fits(1e9, 1000, 0.1, 150));
  EXPECT_TRUE(continuation_fits(INFINITY, 10, -1, -1));  // no time limit
}

}  // namespace

}  // namespace dl::exp::search
