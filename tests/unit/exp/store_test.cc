// The store on real files: concurrent writers (processes and threads), a writer killed
// with SIGKILL while appending, a half-written record, re-merging.
#include "exp/store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <set>
#include <thread>
#include <vector>

#include "client/journal.h"
#include "core/sysio.h"
#include "dl/client.h"
#include "exp/journal.h"
#include "exp/writer.h"

namespace dl::exp {

using namespace dl::sys;  // files: join, open_file, list_dir, ...
namespace {

class StoreTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dl-exp-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = ensure_journals_dir(root_, "exp");
  }
  void TearDown() override { remove_tree(root_); }

  static nlohmann::json metric(const std::string& trial, std::int64_t step, double v) {
    return {{"kind", "metrics"},
            {"trial", trial},
            {"step", step},
            {"time", 1.0 + step},
            {"values", {{"loss", v}}}};
  }

  std::string root_, dir_;
};

// Every (trial, step) of `metrics` exactly once, steps 0..n-1 for each trial.
void expect_each_once(const nlohmann::json& metrics, const std::set<std::string>& trials, int n) {
  std::set<std::pair<std::string, std::int64_t>> seen;
  for (const auto& m : metrics) {
    EXPECT_TRUE(seen.emplace(m["trial"], m["step"]).second) << m.dump();
  }
  for (const auto& t : trials) {
    for (int s = 0; s < n; ++s) EXPECT_TRUE(seen.count({t, s})) << t << " step " << s;
  }
  EXPECT_EQ(seen.size(), trials.size() * static_cast<std::size_t>(n));
}

TEST_F(StoreTest, ConcurrentWritersProcessesAndThreadsMergedWhileWriting) {
  constexpr int kProcesses = 6, kThreads = 4, kRecords = 300;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // One journal per process, shared by its threads.
      JournalWriter w(dir_, "run-p" + std::to_string(p));
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
          const std::string trial = "p" + std::to_string(p) + "t" + std::to_string(t);
          for (int s = 0; s < kRecords; ++s) w.append(metric(trial, s, s * 0.5), s % 50 == 0);
        });
      }
      for (auto& th : threads) th.join();
      ::_exit(0);
    }
    children.push_back(pid);
  }
  // Merges while the writers write: each merge sees a prefix, none duplicates.
  Store store(root_, "exp");
  for (int i = 0; i < 5; ++i) store.merge();
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  const MergeStats last = store.merge();
  EXPECT_EQ(last.corrupt, 0u);
  std::set<std::string> trials;
  for (int p = 0; p < kProcesses; ++p) {
    for (int t = 0; t < kThreads; ++t)
      trials.insert("p" + std::to_string(p) + "t" + std::to_string(t));
  }
  expect_each_once(store.metrics(std::nullopt), trials, kRecords);
  EXPECT_EQ(store.trials().size(), trials.size());
}

TEST_F(StoreTest, WriterKilledWithSigkillWhileAppendingLosesNothingComplete) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(ready[0]);
    JournalWriter w(dir_, "run-killed");
    for (std::int64_t s = 0;; ++s) {
      // Large records so that the kill often lands inside a write.
      nlohmann::json r = metric("killed", s, 1.0);
      r["pad"] = std::string(8192, 'x');
      w.append(std::move(r), false);
      if (s == 100) [[maybe_unused]]
        auto n = ::write(ready[1], "x", 1);
    }
  }
  ::close(ready[1]);
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));

  // What the file holds: every complete line is a good record, numbered 1..n.
  const auto names = list_dir(dir_);
  ASSERT_EQ(names.size(), 1u);
  const std::string bytes = read_file(join(dir_, names[0]), 1u << 30);
  const Scan scan = scan_journal(bytes);
  EXPECT_EQ(scan.corrupt, 0u);
  ASSERT_GT(scan.records.size(), 100u);
  for (std::size_t i = 0; i < scan.records.size(); ++i) EXPECT_EQ(scan.records[i]["seq"], i + 1);

  Store store(root_, "exp");
  store.merge();
  store.merge();
  const auto metrics = store.metrics(std::string("killed"));
  expect_each_once(metrics, {"killed"}, static_cast<int>(scan.records.size()));
}

TEST_F(StoreTest, HalfWrittenRecordIsIgnoredThenTakenWhenComplete) {
  JournalWriter w(dir_, "run-half");
  w.append(metric("t", 0, 1.0), true);
  // A record cut in the middle, as a full disk or a crash leaves it.
  nlohmann::json next = metric("t", 1, 2.0);
  next["seq"] = 2;
  const std::string line = journal::frame(next.dump());
  const std::string half = line.substr(0, line.size() / 2);
  {
    Fd fd = open_file(w.path(), O_WRONLY | O_APPEND);
    ASSERT_EQ(::write(fd.get(), half.data(), half.size()), static_cast<ssize_t>(half.size()));
  }
  Store store(root_, "exp");
  EXPECT_EQ(store.merge().records, 1u);
  EXPECT_EQ(store.metrics(std::nullopt).size(), 1u);
  // The rest arrives (a writer that was only slow): the record is taken, once.
  {
    Fd fd = open_file(w.path(), O_WRONLY | O_APPEND);
    const std::string rest = line.substr(half.size());
    ASSERT_EQ(::write(fd.get(), rest.data(), rest.size()), static_cast<ssize_t>(rest.size()));
  }
  EXPECT_EQ(store.merge().records, 1u);
  expect_each_once(store.metrics(std::nullopt), {"t"}, 2);
}

TEST_F(StoreTest, TornRecordFollowedByOthersIsSkippedAndCounted) {
  {
    JournalWriter w(dir_, "run-torn");
    w.append(metric("t", 0, 1.0), true);
  }
  const std::string path = join(dir_, list_dir(dir_)[0]);
  {
    Fd fd = open_file(path, O_WRONLY | O_APPEND);
    const std::string garbage = "0badc0de {\"seq\":2,\"trial\":\"t\",\"ki\n";
    ASSERT_EQ(::write(fd.get(), garbage.data(), garbage.size()),
              static_cast<ssize_t>(garbage.size()));
    nlohmann::json r = metric("t", 1, 2.0);
    r["seq"] = 3;
    const std::string line = journal::frame(r.dump());
    ASSERT_EQ(::write(fd.get(), line.data(), line.size()), static_cast<ssize_t>(line.size()));
  }
  Store store(root_, "exp");
  const MergeStats s = store.merge();
  EXPECT_EQ(s.records, 2u);
  EXPECT_EQ(s.corrupt, 1u);
  expect_each_once(store.metrics(std::nullopt), {"t"}, 2);
}

TEST_F(StoreTest, FifoLinkAndDirectoryJournalsAreSkippedAndNamed) {
  {
    JournalWriter w(dir_, "run-good");
    w.append(metric("t", 0, 1.0), true);
  }
  // A FIFO would block an open without O_NONBLOCK, and a read forever.
  ASSERT_EQ(::mkfifo(join(dir_, "fifo.jsonl").c_str(), 0600), 0);
  ASSERT_EQ(::symlink("/etc/passwd", join(dir_, "link.jsonl").c_str()), 0);
  ASSERT_TRUE(make_dir(join(dir_, "dir.jsonl"), 0700));
  Store store(root_, "exp");
  const MergeStats s = store.merge();
  EXPECT_EQ(s.records, 1u);
  ASSERT_EQ(s.skipped.size(), 3u);
  std::set<std::string> skipped(s.skipped.begin(), s.skipped.end());
  EXPECT_TRUE(skipped.count(join(dir_, "fifo.jsonl") + ": not a regular file"));
  EXPECT_TRUE(skipped.count(join(dir_, "dir.jsonl") + ": not a regular file"));
  EXPECT_TRUE(skipped.count(join(dir_, "link.jsonl") + ": a symbolic link"));
  expect_each_once(store.metrics(std::nullopt), {"t"}, 1);
}

TEST_F(StoreTest, SparseJournalIsSkippedOverNotRead) {
  const std::string path = join(dir_, "sparse.jsonl");
  {
    Fd fd = open_file(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    nlohmann::json r = metric("t", 0, 1.0);
    r["seq"] = 1;
    const std::string line = journal::frame(r.dump());
    write_all_at(fd, line.data(), line.size(), 0);
    // 64 GiB of hole after the record: never allocated whole.
    ASSERT_EQ(::ftruncate(fd.get(), off_t{64} << 30), 0);
  }
  Store store(root_, "exp");
  const MergeStats s = store.merge();
  EXPECT_EQ(s.records, 1u);
  // The piece with the record, and one more up to where the file system says the hole
  // starts (its block), not 64 GiB.
  EXPECT_LE(s.bytes, 2 * kMergeChunk);
  EXPECT_FALSE(s.more);
  expect_each_once(store.metrics(std::nullopt), {"t"}, 1);
  EXPECT_EQ(store.merge().bytes, 0u);  // read once
}

TEST_F(StoreTest, LineLongerThanAChunkIsCorruptAndTheNextRecordTaken) {
  const std::string path = join(dir_, "long.jsonl");
  {
    Fd fd = open_file(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    const std::string junk(kMergeChunk + 100, 'x');
    write_all_at(fd, junk.data(), junk.size(), 0);
    nlohmann::json r = metric("t", 0, 1.0);
    r["seq"] = 1;
    const std::string line = "\n" + journal::frame(r.dump());
    write_all_at(fd, line.data(), line.size(), junk.size());
  }
  Store store(root_, "exp");
  const MergeStats s = store.merge();
  EXPECT_EQ(s.records, 1u);
  EXPECT_EQ(s.corrupt, 2u);  // the first chunk, then the rest of that line
  expect_each_once(store.metrics(std::nullopt), {"t"}, 1);
}

TEST_F(StoreTest, MergeReadsAtMostItsBudgetAndGoesOnNextTime) {
  {
    JournalWriter w(dir_, "run-budget");
    for (int step = 0; step < 200; ++step) w.append(metric("t", step, step), false);
  }
  Store store(root_, "exp");
  MergeStats s = store.merge(1000);
  EXPECT_LE(s.bytes, 1000u);
  EXPECT_TRUE(s.more);
  EXPECT_GT(s.records, 0u);
  EXPECT_LT(s.records, 200u);
  std::size_t merges = 1;
  while (s.more && merges < 1000) {
    s = store.merge(1000);
    ++merges;
  }
  EXPECT_FALSE(s.more);
  EXPECT_GT(merges, 10u);
  expect_each_once(store.metrics(std::nullopt), {"t"}, 200);
}

TEST_F(StoreTest, ListExperimentsSkipsWhatIsNotReadable) {
  ensure_journals_dir(root_, "mine");
  if (::geteuid() == 0) {
    // Root reads anything: another owner is what makes it skip.
    ensure_journals_dir(root_, "theirs");
    ASSERT_EQ(::chown(join(root_, "theirs").c_str(), 65534, 65534), 0);
  } else {
    ASSERT_TRUE(make_dir(join(root_, "theirs"), 0000));
  }
  std::vector<std::string> skipped;
  EXPECT_EQ(list_experiments(root_, &skipped), (std::vector<std::string>{"exp", "mine"}));
  EXPECT_EQ(skipped, std::vector<std::string>{"theirs"});
  EXPECT_TRUE(not_yours(root_, "theirs").has_value());
  EXPECT_FALSE(not_yours(root_, "mine").has_value());
  EXPECT_FALSE(not_yours(root_, "missing").has_value());
  ::chmod(join(root_, "theirs").c_str(), 0700);
}

TEST_F(StoreTest, RemergingNeverDuplicatesEvenWithoutTheKeptOffsets) {
  {
    JournalWriter w(dir_, "run-a");
    for (int s = 0; s < 10; ++s) w.append(metric("a", s, s), false);
    w.append({{"kind", "event"},
              {"trial", "a"},
              {"event", "run_started"},
              {"time", 0.5},
              {"restarts", 1},
              {"job_id", "17"},
              {"hparams", {{"lr", 0.1}}}},
             true);
    w.append({{"kind", "checkpoint"},
              {"trial", "a"},
              {"step", 9},
              {"path", "/c/step-9"},
              {"time", 11.0}},
             true);
    w.append({{"kind", "event"},
              {"trial", "a"},
              {"event", "completed"},
              {"time", 12.0},
              {"reason", "every rank completed"}},
             true);
  }
  {
    Store store(root_, "exp");
    EXPECT_EQ(store.merge().records, 13u);
    EXPECT_EQ(store.merge().records, 0u);
  }
  // Forget the offsets (as an older database would): the keys still hold.
  ASSERT_EQ(
      std::system(("sqlite3 " + database_path(root_, "exp") + " 'DELETE FROM journals'").c_str()),
      0);
  Store store(root_, "exp");
  store.merge();
  expect_each_once(store.metrics(std::nullopt), {"a"}, 10);
  EXPECT_EQ(store.events(std::nullopt).size(), 2u);
  EXPECT_EQ(store.checkpoints(std::nullopt).size(), 1u);
  const auto trials = store.trials();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0]["state"], "completed");
  EXPECT_EQ(trials[0]["job_id"], "17");
  EXPECT_EQ(trials[0]["restarts"], 1);
  EXPECT_EQ(trials[0]["hparams"]["lr"], 0.1);
  EXPECT_EQ(trials[0]["step"], 9);
}

TEST_F(StoreTest, StateFollowsTheNewestEventWhateverTheMergeOrder) {
  // Run 2's journal (requeued then resumed and completed) sorts before run 1's.
  {
    JournalWriter w(dir_, "run-a-2");
    w.append({{"kind", "event"},
              {"trial", "a"},
              {"event", "run_started"},
              {"time", 20.0},
              {"reason", "resumed from /c/step-000000005"},
              {"restarts", 1}},
             true);
    w.append({{"kind", "event"}, {"trial", "a"}, {"event", "completed"}, {"time", 30.0}}, true);
  }
  {
    JournalWriter w(dir_, "run-a-1");
    w.append({{"kind", "event"}, {"trial", "a"}, {"event", "run_started"}, {"time", 1.0}}, true);
    w.append({{"kind", "checkpoint"},
              {"trial", "a"},
              {"step", 5},
              {"time", 9.0},
              {"path", "/c/step-000000005"}},
             true);
    w.append({{"kind", "event"}, {"trial", "a"}, {"event", "requeued"}, {"time", 10.0}}, true);
  }
  Store store(root_, "exp");
  store.merge();
  const auto trials = store.trials();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0]["state"], "completed");
  EXPECT_EQ(trials[0]["restarts"], 1);
  const auto ckpts = store.checkpoints(std::nullopt);
  ASSERT_EQ(ckpts.size(), 1u);
  EXPECT_EQ(ckpts[0]["verified"], true);  // run 2 resumed from it
}

// A run preempted after its checkpoint of step 159 that still reported step 160 (and
// 165) before it ended; the next run resumed from step 159 and reported 160 again.
class SupersedeTest : public StoreTest {
 protected:
  // Run 1: steps 150, 160, 165 reported at times 150.., checkpoint 159, requeued.
  void first_run() {
    JournalWriter w(dir_, "run-a-1");
    w.append(event("run_started", 100.0, "fresh start", -1), true);
    for (std::int64_t s : {150, 160, 165}) w.append(loss(s, 1.0, 1.0 * s), true);
    w.append({{"kind", "checkpoint"},
              {"trial", "a"},
              {"step", 159},
              {"time", 159.5},
              {"path", "/c/step-000000159"}},
             true);
    w.append(event("requeued", 170.0, "preempted"), true);
  }
  // Run 2 started at time 200 from `resume_step` (none: what it resumed from is unknown).
  void second_run(const std::string& reason, std::optional<std::int64_t> resume_step) {
    JournalWriter w(dir_, "run-a-2");
    w.append(event("run_started", 200.0, reason, resume_step), true);
    w.append(loss(160, 2.0, 201.0), true);
    w.append(loss(170, 2.0, 202.0), true);
  }
  static nlohmann::json event(const std::string& kind, double time, const std::string& reason,
                              std::optional<std::int64_t> resume_step = std::nullopt) {
    nlohmann::json e = {
        {"kind", "event"}, {"trial", "a"}, {"event", kind}, {"time", time}, {"reason", reason}};
    if (resume_step) e["resume_step"] = *resume_step;
    return e;
  }
  static nlohmann::json loss(std::int64_t step, double v, double time) {
    return {{"kind", "metrics"},
            {"trial", "a"},
            {"step", step},
            {"time", time},
            {"values", {{"loss", v}}}};
  }
  // The steps and values `metrics` shows, in order.
  static std::vector<std::pair<std::int64_t, double>> shown(const nlohmann::json& metrics) {
    std::vector<std::pair<std::int64_t, double>> out;
    for (const auto& m : metrics) out.emplace_back(m["step"], m["value"]);
    return out;
  }
  using Rows = std::vector<std::pair<std::int64_t, double>>;
  std::int64_t superseded_rows() {
    const std::string cmd = "sqlite3 " + database_path(root_, "exp") +
                            " 'SELECT count(*) FROM metrics WHERE superseded' > " + root_ +
                            "/count";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    return std::stoll(read_file(root_ + "/count", 64));
  }
};

TEST_F(SupersedeTest, StepsPastTheResumedCheckpointAreShownOnceAsTheNewRunReportedThem) {
  first_run();
  second_run("resumed from /c/step-000000159", 159);
  Store store(root_, "exp");
  store.merge();
  EXPECT_EQ(shown(store.metrics(std::nullopt)), (Rows{{150, 1.0}, {160, 2.0}, {170, 2.0}}));
  EXPECT_EQ(shown(store.metrics("a")), (Rows{{150, 1.0}, {160, 2.0}, {170, 2.0}}));
  const auto trials = store.trials();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0]["step"], 170);
  EXPECT_EQ(trials[0]["metrics"]["loss"], 2.0);
  // Kept as history.
  EXPECT_EQ(superseded_rows(), 2);
}

TEST_F(SupersedeTest, TheSecondRunMergedFirstGivesTheSameResult) {
  second_run("resumed from /c/step-000000159", 159);
  {
    Store store(root_, "exp");
    store.merge();
  }
  first_run();
  Store store(root_, "exp");
  store.merge();
  EXPECT_EQ(shown(store.metrics(std::nullopt)), (Rows{{150, 1.0}, {160, 2.0}, {170, 2.0}}));
}

TEST_F(SupersedeTest, ARunRecordedWithoutItsResumeStepResumedFromTheCheckpointItsReasonNames) {
  first_run();
  second_run("resumed from /c/step-000000159", std::nullopt);
  Store store(root_, "exp");
  store.merge();
  EXPECT_EQ(shown(store.metrics(std::nullopt)), (Rows{{150, 1.0}, {160, 2.0}, {170, 2.0}}));
}

TEST_F(SupersedeTest, AFreshStartSupersedesEverythingEarlier) {
  first_run();
  second_run("fresh start", -1);
  Store store(root_, "exp");
  store.merge();
  EXPECT_EQ(shown(store.metrics(std::nullopt)), (Rows{{160, 2.0}, {170, 2.0}}));
}

TEST_F(SupersedeTest, WhereTheStartIsUnknownOnlyTheNewerReportOfAStepReplacesTheOlder) {
  // The program keeps its own checkpoints: dlrun does not know where it resumed.
  first_run();
  second_run("fresh start", std::nullopt);
  Store store(root_, "exp");
  store.merge();
  EXPECT_EQ(shown(store.metrics(std::nullopt)),
            (Rows{{150, 1.0}, {160, 2.0}, {165, 1.0}, {170, 2.0}}));
}

TEST_F(SupersedeTest, ADatabaseMadeBeforeSupersedingGainsItWhenOpened) {
  // The two runs, merged into the tables as the first release made them.
  const std::string sql =
      "CREATE TABLE metrics(trial TEXT NOT NULL, step INTEGER NOT NULL, name TEXT NOT NULL, "
      "value REAL NOT NULL, time REAL, writer TEXT NOT NULL, seq INTEGER NOT NULL, "
      "PRIMARY KEY(writer, seq, name)); "
      "CREATE TABLE events(trial TEXT NOT NULL, time REAL, kind TEXT NOT NULL, reason TEXT, "
      "step INTEGER, restarts INTEGER, writer TEXT NOT NULL, seq INTEGER NOT NULL, "
      "PRIMARY KEY(writer, seq)); "
      "CREATE TABLE checkpoints(trial TEXT NOT NULL, step INTEGER NOT NULL, path TEXT, "
      "verified INTEGER NOT NULL DEFAULT 0, time REAL, writer TEXT NOT NULL, "
      "seq INTEGER NOT NULL, PRIMARY KEY(writer, seq)); "
      "INSERT INTO metrics VALUES('a', 150, 'loss', 1, 150, 'w1', 1), "
      "('a', 160, 'loss', 1, 160, 'w1', 2), ('a', 165, 'loss', 1, 165, 'w1', 3), "
      "('a', 160, 'loss', 2, 201, 'w2', 2), ('a', 170, 'loss', 2, 202, 'w2', 3); "
      "INSERT INTO checkpoints VALUES('a', 159, '/c/s159', 1, 159.5, 'w1', 4); "
      "INSERT INTO events VALUES('a', 200, 'run_started', 'resumed from /c/s159', NULL, 1, "
      "'w2', 1);";
  ASSERT_EQ(std::system(("sqlite3 " + database_path(root_, "exp") + " \"" + sql + "\"").c_str()),
            0);
  Store store(root_, "exp");
  EXPECT_EQ(shown(store.metrics(std::nullopt)), (Rows{{150, 1.0}, {160, 2.0}, {170, 2.0}}));
  EXPECT_EQ(superseded_rows(), 2);
}

TEST_F(StoreTest, ClientReportMetricsAppendsEveryCallToItsOwnJournal) {
  ::setenv("DL_EXP_JOURNALS", dir_.c_str(), 1);
  ::setenv("DL_EXP_TRIAL", "c1", 1);
  ::unsetenv("DL_CLIENT_FILE");
  for (int s = 0; s < 50; ++s) dl::report_metrics(s, {{"loss", 1.0 / (s + 1)}, {"acc", 0.5}});
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // A forked child writes a journal of its own.
    dl::report_metrics(50, {{"loss", 0.01}, {"acc", 0.5}});
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_EQ(list_dir(dir_).size(), 2u);
  Store store(root_, "exp");
  EXPECT_EQ(store.merge().corrupt, 0u);
  const auto metrics = store.metrics(std::string("c1"));
  EXPECT_EQ(metrics.size(), 102u);
  nlohmann::json loss = nlohmann::json::array();
  for (const auto& m : metrics) {
    if (m["name"] == "loss") loss.push_back(m);
  }
  expect_each_once(loss, {"c1"}, 51);
  EXPECT_DOUBLE_EQ(loss[2]["value"].get<double>(), 1.0 / 3);  // full precision
}

}  // namespace
}  // namespace dl::exp
