#include "exp/journal.h"

#include <gtest/gtest.h>

#include <map>

#include "client/journal.h"
#include "core/error.h"

namespace dl::exp {
namespace {

TEST(Journal, FrameMatchesZlibCrc32) {
  // zlib.crc32(b"123456789") == 0xcbf43926, the CRC-32 check value.
  EXPECT_EQ(journal::crc32("123456789"), 0xcbf43926u);
  EXPECT_EQ(journal::frame("{}"), "a3a6bf43 {}\n");  // zlib.crc32(b"{}") in Python
}

TEST(Journal, ScanKeepsCompleteRecordsAndLeavesATornTail) {
  const std::string a = journal::frame(R"({"seq":1,"kind":"metrics"})");
  const std::string b = journal::frame(R"({"seq":2,"kind":"metrics"})");
  const std::string torn = b.substr(0, b.size() / 2);
  const Scan s = scan_journal(a + b + torn);
  ASSERT_EQ(s.records.size(), 2u);
  EXPECT_EQ(s.records[1]["seq"], 2);
  EXPECT_EQ(s.consumed, a.size() + b.size());
  EXPECT_EQ(s.corrupt, 0u);
}

TEST(Journal, ScanSkipsALineWhoseChecksumDoesNotMatch) {
  std::string a = journal::frame(R"({"seq":1,"value":1.5})");
  a[a.find("1.5")] = '7';  // a flipped byte
  const std::string b = journal::frame(R"({"seq":2})");
  const std::string not_json = journal::frame("not json");
  const Scan s = scan_journal(a + "\n" + not_json + b);
  ASSERT_EQ(s.records.size(), 1u);
  EXPECT_EQ(s.records[0]["seq"], 2);
  EXPECT_EQ(s.corrupt, 3u);
  EXPECT_EQ(s.consumed, a.size() + 1 + not_json.size() + b.size());
}

TEST(Journal, Names) {
  EXPECT_NO_THROW(validate_name("experiment", "mnist-lr_0.1"));
  for (const char* bad : {"", ".hidden", "a/b", "a b", ".."}) {
    try {
      validate_name("experiment", bad);
      FAIL() << bad;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("experiment '"), std::string::npos) << e.what();
    }
  }
}

TEST(Journal, RootAndTrialFromEnvironment) {
  std::map<std::string, std::string> env = {{"HOME", "/home/u"}, {"SLURM_JOB_ID", "42"}};
  auto get = [&](const std::string& k) -> std::optional<std::string> {
    auto it = env.find(k);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  EXPECT_EQ(experiments_root(get), "/home/u/.slurm-dl/experiments");
  EXPECT_EQ(trial_from_env(get), "42");
  env["SLURM_ARRAY_JOB_ID"] = "40";
  env["SLURM_ARRAY_TASK_ID"] = "3";
  EXPECT_EQ(trial_from_env(get), "40_3");
  env["DL_TRIAL"] = "lr-0.1";
  EXPECT_EQ(trial_from_env(get), "lr-0.1");
  env["DL_EXP_ROOT"] = "/shared/exp";
  EXPECT_EQ(experiments_root(get), "/shared/exp");
  EXPECT_EQ(database_path("/shared/exp", "e"), "/shared/exp/e/experiment.db");
  env["DL_EXP_ROOT"] = "relative";
  EXPECT_THROW(experiments_root(get), InputError);
}

TEST(Journal, StatesAfterEvents) {
  EXPECT_EQ(state_after("run_started"), "running");
  EXPECT_EQ(state_after("requeued"), "pending");
  EXPECT_EQ(state_after("restarting"), "running") << "a restart inside the allocation";
  EXPECT_EQ(state_after("held"), "held") << "dlrun held the job";
  EXPECT_EQ(state_after("paused"), "paused") << "dl-search pause, or a rung in an old journal";
  EXPECT_EQ(state_after("waiting"), "waiting") << "at a rung, waiting for promotion";
  EXPECT_EQ(state_after("completed"), "completed");
  EXPECT_EQ(state_after("failed"), "failed");
  EXPECT_EQ(state_after("stopped"), "stopped");
  EXPECT_EQ(state_after("checkpoint"), std::nullopt);
  for (const auto& kind :
       {"run_started", "requeued", "held", "completed", "failed", "stopped", "paused", "waiting"}) {
    const auto& all = trial_states();
    EXPECT_NE(std::find(all.begin(), all.end(), *state_after(kind)), all.end()) << kind;
  }
}

}  // namespace
}  // namespace dl::exp
