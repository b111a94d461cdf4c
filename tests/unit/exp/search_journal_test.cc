// The driver's journal replayed (exp/search_journal.h's replay and status, no Slurm): an
// in-job continuation is an operation like a promotion, its intent names the job it
// continues in, and once recorded the job is that operation's (status: continued).
#include "exp/search_journal.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/sysio.h"
#include "exp/journal.h"
#include "exp/writer.h"
#include "tests/unit/exp/search_test_util.h"

namespace dl::exp::search {
namespace {

using nlohmann::json;

class DriverReplay : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = temp_root();
    e_ = small_asha("cont", root_);
    e_.searcher.max_trials = 8;
    e_.searcher.max_concurrent_trials = 1;
    create_experiment(root_, e_);
  }
  void TearDown() override { dl::sys::remove_tree(root_); }

  static json events(std::initializer_list<json> list) {
    return {{"kind", "search"}, {"rec", "events"}, {"events", json(list)}, {"time", 1.0}};
  }
  static json ev(const std::string& kind, const std::string& trial, std::int64_t step = 0,
                 double value = 0, bool in_job = false) {
    json j = {{"kind", kind}, {"trial", trial}, {"step", step}, {"value", value}, {"reason", ""}};
    if (in_job) j["in_job"] = true;
    return j;
  }
  static json rec(const std::string& what, std::int64_t op, const std::string& job) {
    json j = {{"kind", "search"}, {"rec", what}, {"op", op}, {"time", 1.0}};
    if (what == "submitted") j["job"] = job;
    if (what == "intent") j["name"] = "x";
    return j;
  }

  std::string root_;
  Experiment e_;
};

TEST_F(DriverReplay, AContinuationIsReplayedAsAnOperationRunningInTheJobOfTheRungBefore) {
  JournalWriter w(journals_dir(root_, "cont"), "search");
  w.append(rec("intent", 0, ""), true);
  w.append(rec("submitted", 0, "100"), true);
  // t001 ends rung 0 (its job ended): alone there, it waits; t002 starts.
  w.append(events({ev("reported", "t001", 1, 5.0), ev("finished", "t001")}), true);
  w.append(rec("intent", 1, ""), true);
  w.append(rec("submitted", 1, "101"), true);
  // t002 ends rung 0 better, its job waiting: promoted for its own slot, in its job.
  w.append(events({ev("reported", "t002", 1, 3.0), ev("finished", "t002", 0, 0, true)}), true);
  json intent = rec("intent", 2, "");
  intent["continue_job"] = "101";
  w.append(intent, true);
  {
    Searcher s(e_.searcher);
    const Replay r = replay(root_, e_, s);
    ASSERT_EQ(r.ops.size(), 3u);
    EXPECT_EQ(r.ops[2].kind, Op::Kind::resume);
    EXPECT_EQ(r.ops[2].trial, "t002");
    EXPECT_EQ(r.ops[2].rung, 1);
    EXPECT_TRUE(r.ops[2].in_job);
    // Killed after the intent: the job it continues in is known, not yet its run's.
    EXPECT_EQ(r.in_job_intent.at(2), "101");
    EXPECT_EQ(r.jobs.count(2), 0u);
    EXPECT_EQ(s.find("t002")->state, TrialState::running);
    EXPECT_EQ(s.find("t002")->rung, 1);
  }
  json done = rec("submitted", 2, "101");
  done["in_job"] = true;
  w.append(done, true);
  const json st = status(root_, "cont");
  const json& op = st["operations"][2];
  EXPECT_EQ(op["job"], "101");
  EXPECT_EQ(op["continued"], true);
  EXPECT_EQ(st["operations"][1]["continued"], false);
  EXPECT_EQ(st["operations"][0]["continued"], false);
}

TEST_F(DriverReplay, ARungDoneWhileItsJobEndsRanksTheRungBeforeTheJobHasEnded) {
  e_.searcher.max_concurrent_trials = 2;
  JournalWriter w(journals_dir(root_, "cont"), "search");
  // t001 was told to end after rung 0 (rung_done); its job has not ended yet.
  w.append(events({ev("reported", "t001", 1, 5.0), ev("rung_done", "t001")}), true);
  Searcher s(e_.searcher);
  const Replay r = replay(root_, e_, s);
  EXPECT_EQ(r.ops.size(), 2u);  // t001 and t002, nothing more: t001's slot is still taken
  EXPECT_EQ(s.find("t001")->state, TrialState::running);
  EXPECT_EQ(s.find("t001")->rung_values.at(0), 5.0);
}

TEST_F(DriverReplay, WithoutInJobTheSameRungEndIsAPromotionInANewJob) {
  JournalWriter w(journals_dir(root_, "cont"), "search");
  w.append(events({ev("reported", "t001", 1, 5.0), ev("finished", "t001")}), true);
  w.append(events({ev("reported", "t002", 1, 3.0), ev("finished", "t002")}), true);
  Searcher s(e_.searcher);
  const Replay r = replay(root_, e_, s);
  ASSERT_EQ(r.ops.size(), 3u);
  EXPECT_EQ(r.ops[2].trial, "t002");
  EXPECT_FALSE(r.ops[2].in_job);
  EXPECT_TRUE(r.in_job_intent.empty());
}

}  // namespace
}  // namespace dl::exp::search
