// The driver's promises (exp/search_driver.h, docs/design/search.md) against a fake Slurm
// (fake_slurm_jobs.h): a driver killed at any point of a search, then started again,
// carries on with no trial submitted twice and no result lost. Each test runs its search
// once per point: the first driver is abandoned at its Nth call to Slurm, before or after
// Slurm did what it asked, and a second driver replays the journal and ends the search.
#include "exp/search_driver.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "core/sysio.h"
#include "exp/journal.h"
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

  // A search in a root of its own whose first driver `arm` sets up to be killed (the
  // fake's kill_at, kill_when); `killed` is called after it died, then a second driver
  // ends the search. Returns the fake, and whether the first driver was killed.
  struct Run {
    std::unique_ptr<FakeSlurmJobs> slurm;
    std::string root;
    bool killed = false;
  };
  Run run(const std::function<void(Run&)>& arm, const std::function<void(Run&)>& killed = {}) {
    Run r;
    r.root = sys::join(tmp_, std::to_string(runs_++));
    e_.root = r.root;
    create_experiment(r.root, e_);
    r.slurm = std::make_unique<FakeSlurmJobs>(r.root, e_.name, e_.searcher.metric);
    arm(r);
    DriveOptions options;
    options.poll_seconds = 0;
    try {
      EXPECT_EQ(drive(r.root, e_.name, options, *r.slurm), 0);
    } catch (const Killed&) {
      r.killed = true;
      r.slurm->kill_at(0, false);
      if (killed) killed(r);
      EXPECT_EQ(drive(r.root, e_.name, options, *r.slurm), 0);
    }
    return r;
  }

  // The search ended; every run of a trial (create, resume) has a job of its own, or
  // that of the trial's run before it when it continued in it; Slurm ran no other job;
  // every rung's result is the one its job reported; no run failed.
  static void expect_kept_promises(const Run& r, const std::string& where) {
    SCOPED_TRACE(where);
    const json st = status(r.root, "crash");
    EXPECT_TRUE(st["finished"].get<bool>());
    EXPECT_TRUE(st["complete"].get<bool>());
    std::map<std::string, std::string> trial_of;  // job -> trial
    for (const auto& op : st["operations"]) {
      if (op["kind"] != "create" && op["kind"] != "resume") continue;
      const std::string job = op["job"];
      EXPECT_NE(job, "") << op.dump();
      const bool known = trial_of.count(job) != 0;
      EXPECT_EQ(known, op["continued"].get<bool>()) << op.dump();
      if (known) {
        EXPECT_EQ(trial_of[job], op["trial"]) << op.dump();
      }
      trial_of[job] = op["trial"];
    }
    std::set<std::string> names;
    for (const auto& j : r.slurm->jobs()) {
      EXPECT_TRUE(names.insert(j.q.name).second) << "submitted twice: " << j.q.name;
      EXPECT_EQ(trial_of.count(j.q.id), 1u) << "a job no run owns: " << j.q.id << " " << j.q.name;
    }
    EXPECT_EQ(r.slurm->jobs().size(), trial_of.size());
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
    const auto armed = [&](int n, bool after) {
      return [&setup, n, after](Run& r) {
        if (setup) setup(r);
        r.slurm->kill_at(n, after);
      };
    };
    const Run whole = run(armed(0, false));
    check(whole, "not killed");
    const int calls = whole.slurm->calls();
    ASSERT_GT(calls, 10);
    for (int n = 1; n <= calls; ++n) {
      for (const bool after : {false, true}) {
        const Run r = run(armed(n, after));
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

// The same with in-job continuation: a trial promoted as its job ends a rung goes on in
// that job, whatever call to Slurm the driver died at.
TEST_F(DriverKilled, AtAnyCallContinuationsKeepThePromises) {
  e_.searcher.continue_in_job = true;
  at_every_call({}, [](const Run& r, const std::string& where) {
    expect_kept_promises(r, where);
    SCOPED_TRACE(where);
    const json st = status(r.root, "crash");
    bool continued = false;
    for (const auto& op : st["operations"]) continued = continued || op["continued"].get<bool>();
    EXPECT_TRUE(continued);
  });
}

// The records of the driver's journals (search.*.jsonl) of `root`, each with its file
// and the byte where its line starts.
struct Located {
  json record;
  std::string file;
  std::size_t offset;
};
std::vector<Located> search_records(const std::string& root) {
  std::vector<Located> out;
  const std::string dir = journals_dir(root, "crash");
  std::vector<std::string> names = sys::list_dir(dir);
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    if (name.rfind("search.", 0) != 0) continue;
    const std::string path = sys::join(dir, name);
    const std::string text = sys::read_file(path, 1 << 24);
    for (std::size_t at = 0; at < text.size();) {
      const std::size_t end = text.find('\n', at);
      for (const auto& rec : scan_journal(text.substr(at, end + 1 - at)).records) {
        out.push_back({rec, path, at});
      }
      at = end + 1;
    }
  }
  return out;
}

bool continued_record(const json& rec) {
  return rec.value("rec", "") == "submitted" && rec.value("in_job", false);
}

// A driver killed right after it decided that a job continues (the decision file), before
// it recorded the job as that run's: the next one takes the job as the run's (its
// decision holds), no new job. The journal of a driver killed at the first Slurm call
// after its kth continuation, cut before that continuation's record, is exactly that.
TEST_F(DriverKilled, AContinuationDecidedBeforeTheDriverDiedIsTheRunsJob) {
  e_.searcher.continue_in_job = true;
  e_.searcher.asha_mode = AshaMode::stopping;
  e_.searcher.max_trials = 1;
  e_.searcher.max_concurrent_trials = 1;  // t001 continues to rungs 1 and 2 in its job
  for (int k = 1; k <= 2; ++k) {
    const auto kth_recorded = [k](const std::string& root) {
      int n = 0;
      for (const auto& l : search_records(root)) n += continued_record(l.record) ? 1 : 0;
      return n >= k;
    };
    const Run r = run(
        [&](Run& r) {
          r.slurm->kill_when([root = r.root, kth_recorded] { return kth_recorded(root); });
        },
        [k](Run& r) {
          int n = 0;
          for (const auto& l : search_records(r.root)) {
            if (continued_record(l.record) && ++n == k) {
              ASSERT_EQ(::truncate(l.file.c_str(), static_cast<off_t>(l.offset)), 0);
            }
          }
        });
    const std::string where = "killed after continuation " + std::to_string(k);
    EXPECT_TRUE(r.killed) << where;
    expect_kept_promises(r, where);
    const json st = status(r.root, "crash");
    std::vector<bool> continued;
    for (const auto& op : st["operations"]) {
      if (op["kind"] == "create" || op["kind"] == "resume") continued.push_back(op["continued"]);
    }
    EXPECT_EQ(continued, (std::vector<bool>{false, true, true})) << where;
    // Each rung's result recorded once in the driver's journals.
    int finished = 0;
    for (const auto& l : search_records(r.root)) {
      for (const auto& ev : l.record.value("events", json::array())) {
        finished += ev["trial"] == "t001" && ev["kind"] == "finished" ? 1 : 0;
      }
    }
    EXPECT_EQ(finished, 3) << where;  // rungs 0, 1 and 2
  }
}

}  // namespace
}  // namespace dl::exp::search
