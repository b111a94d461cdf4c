// The ledger's state file: a corrupt copy falls back to the previous one, and a save
// killed (SIGKILL) at any instant leaves a state that parses.
#include "sched/state_file.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "sched/ledger.h"

namespace dl::sched {
namespace {

class StateFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dl-state-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/site_factor_dl.state";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static std::string ledger_text(std::uint32_t jobs) {
    ServiceLedger l;
    for (std::uint32_t j = 1; j <= jobs; ++j) l.running(j, 1000, j % 8, 1000 + j);
    return l.serialize();
  }
  std::optional<LoadedState> load(std::vector<std::string>* complaints = nullptr) {
    return load_newest_good(
        path_, [](const std::string& text) { ServiceLedger::parse(text); },
        [&](const std::string& path, const std::string& why) {
          if (complaints) complaints->push_back(path + ": " + why);
        });
  }

  std::string dir_;
  std::string path_;
};

TEST_F(StateFile, ACorruptStateFallsBackToThePreviousCopy) {
  const std::string first = ledger_text(3);
  const std::string second = ledger_text(5);
  save_durably(path_, first);
  save_durably(path_, second);
  ASSERT_EQ(load()->text, second);

  // One byte flipped in the newest copy: its checksum fails, the previous copy is used.
  std::string bad = second;
  bad[bad.size() / 2] ^= 1;
  std::ofstream(path_, std::ios::trunc) << bad;
  std::vector<std::string> complaints;
  const auto loaded = load(&complaints);
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->text, first);
  EXPECT_EQ(loaded->path, path_ + ".old");
  ASSERT_EQ(complaints.size(), 1u);
  EXPECT_EQ(complaints[0].rfind(path_ + ": ", 0), 0u) << complaints[0];

  // Truncated, or empty: the same.
  std::ofstream(path_, std::ios::trunc) << second.substr(0, second.size() / 2);
  EXPECT_EQ(load()->text, first);
  std::ofstream(path_, std::ios::trunc);
  EXPECT_EQ(load()->text, first);
  // Both bad: nothing, rather than a wrong ledger.
  std::ofstream(path_ + ".old", std::ios::trunc) << "garbage";
  EXPECT_FALSE(load());
}

TEST_F(StateFile, ASaveKilledAtAnyInstantLeavesAStateThatParses) {
  // A child saves new versions as fast as it can; it is killed at random instants, and
  // each time the newest good copy is one of the versions it saved, never nothing.
  std::vector<std::string> versions;
  for (std::uint32_t i = 0; i < 8; ++i) versions.push_back(ledger_text(200 + 50 * i));
  const std::set<std::string> known(versions.begin(), versions.end());
  save_durably(path_, versions[0]);
  std::mt19937 random(12);
  std::uniform_int_distribution<int> micros(0, 20000);
  for (int round = 0; round < 40; ++round) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      for (std::size_t i = 0;; ++i) save_durably(path_, versions[i % versions.size()]);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(micros(random)));
    ASSERT_EQ(kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the saving child ended by itself";
    const auto loaded = load();
    ASSERT_TRUE(loaded) << "round " << round;
    EXPECT_EQ(known.count(loaded->text), 1u) << "round " << round;
  }
}

}  // namespace
}  // namespace dl::sched
