// The driver's promises (exp/search_driver.h, docs/design/search.md) against a fake Slurm
// (fake_slurm_jobs.h): a driver killed at any point of a search, then started again,
// carries on with no trial submitted twice and no result lost. Each test runs its search
// once per point: the first driver is abandoned at its Nth call to Slurm, before or after
// Slurm did what it asked, and a second driver replays the journal and ends the search.
#include "exp/search_driver.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "core/sysio.h"
#include "tests/unit/exp/fake_slurm_jobs.h"
#include "tests/unit/exp/search_test_util.h"

namespace dl::exp::search {
namespace {

using nlohmann::json;

class DriverKilled : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = temp_root();
    e_ = small_asha("crash", "");
    e_.searcher.max_trials = 4;
    e_.searcher.max_concurrent_trials = 2;
    e_.searcher.continue_in_job = false;
  }
  void TearDown() override { sys::remove_tree(tmp_); }

  // A search in a root of its own, the first driver killed at Slurm call `n` (before or
  // `after` its work; 0: never), `setup` called on the fake first. Returns the fake once
  // a second driver has ended the search, and whether the first was killed.
  struct Run {
    std::unique_ptr<FakeSlurmJobs> slurm;
    std::string root;
    bool killed = false;
  };
  Run run(int n, bool after, const std::function<void(Run&)>& setup = {}) {
    Run r;
    r.root = sys::join(tmp_, std::to_string(runs_++));
    e_.root = r.root;
    create_experiment(r.root, e_);
    r.slurm = std::make_unique<FakeSlurmJobs>(r.root, e_.name, e_.searcher.metric);
    if (setup) setup(r);
    DriveOptions options;
    options.poll_seconds = 0;
    r.slurm->kill_at(n, after);
    try {
      EXPECT_EQ(drive(r.root, e_.name, options, *r.slurm), 0);
    } catch (const Killed&) {
      r.killed = true;
      r.slurm->kill_at(0, false);
      EXPECT_EQ(drive(r.root, e_.name, options, *r.slurm), 0);
    }
    return r;
  }

  // The search ended; every run of a trial (create, resume) has its own job, Slurm ran
  // no other; every rung's result is the one its job reported; no run failed.
  static void expect_kept_promises(const Run& r, const std::string& where) {
    SCOPED_TRACE(where);
    const json st = status(r.root, "crash");
    EXPECT_TRUE(st["finished"].get<bool>());
    EXPECT_TRUE(st["complete"].get<bool>());
    std::set<std::string> jobs, names;
    std::size_t runs = 0;
    for (const auto& op : st["operations"]) {
      if (op["kind"] != "create" && op["kind"] != "resume") continue;
      ++runs;
      EXPECT_NE(op["job"], "") << op.dump();
      EXPECT_TRUE(jobs.insert(op["job"].get<std::string>()).second) << op.dump();
    }
    for (const auto& j : r.slurm->jobs()) {
      EXPECT_TRUE(names.insert(j.q.name).second) << "submitted twice: " << j.q.name;
      EXPECT_EQ(jobs.count(j.q.id), 1u) << "a job no run owns: " << j.q.id << " " << j.q.name;
    }
    EXPECT_EQ(r.slurm->jobs().size(), runs);
    const auto rungs = st["rungs"].get<std::vector<std::int64_t>>();
    for (const auto& t : st["trials"]) {
      EXPECT_EQ(t["restarts"], 0) << t.dump();
      EXPECT_NE(t["state"], "failed") << t.dump();
      const double lr = t["hparams"]["lr"];
      for (const auto& [rung, value] : t["rung_values"].items()) {
        const auto step = rungs.at(std::stoul(rung)) - 1;
        EXPECT_DOUBLE_EQ(value.get<double>(), FakeSlurmJobs::loss(lr, step)) << t.dump();
      }
    }
  }

  // Runs the search killed at every Slurm call of an undisturbed driver, before and after
  // its work, each time checked by `check`.
  void at_every_call(const std::function<void(Run&)>& setup,
                     const std::function<void(const Run&, const std::string&)>& check) {
    const Run whole = run(0, false, setup);
    check(whole, "not killed");
    const int calls = whole.slurm->calls();
    ASSERT_GT(calls, 10);
    for (int n = 1; n <= calls; ++n) {
      for (const bool after : {false, true}) {
        const Run r = run(n, after, setup);
        const std::string where =
            "killed at Slurm call " + std::to_string(n) + (after ? ", after it" : ", before it");
        EXPECT_TRUE(r.killed) << where;
        check(r, where);
      }
    }
  }

  std::string tmp_;
  Experiment e_;
  int runs_ = 0;
};

// A driver killed right after sbatch queued a job, before it recorded the job, finds the
// job by its name (the intent recorded before sbatch): never submitted twice.
TEST_F(DriverKilled, AtAnyCallNoTrialRunsTwiceAndNoResultIsLost) {
  at_every_call({}, expect_kept_promises);
}

// A trial stopped by request while its job runs: the stop is recorded before the job is
// cancelled, so a driver killed in between replays it and cancels the job.
TEST_F(DriverKilled, AStoppedTrialsJobIsCancelledWhereverTheDriverDies) {
  // dl-search stop crash t002, once its job runs.
  const auto stop_t002 = [](Run& r) {
    const FakeSlurmJobs* slurm = r.slurm.get();
    r.slurm->on_queue([slurm, root = r.root, asked = false]() mutable {
      for (const auto& j : slurm->jobs()) {
        if (!asked && j.trial == "t002" && j.q.state == "RUNNING") {
          request(root, "crash", "stopped", "t002");
          asked = true;
        }
      }
    });
  };
  at_every_call(stop_t002, [](const Run& r, const std::string& where) {
    expect_kept_promises(r, where);
    SCOPED_TRACE(where);
    const json st = status(r.root, "crash");
    for (const auto& t : st["trials"]) {
      if (t["id"] == "t002") {
        EXPECT_EQ(t["state"], "stopped") << t.dump();
      }
    }
    for (const auto& j : r.slurm->jobs()) {
      if (j.trial == "t002") {
        EXPECT_EQ(j.q.state, "CANCELLED") << j.q.name;
      }
    }
  });
}

}  // namespace
}  // namespace dl::exp::search
