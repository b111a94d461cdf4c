// The driver's decision files (exp/search_decisions.h): the first decision holds, whoever
// takes it and however many at once; a trial waits until one is taken.
#include "exp/search_decisions.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client/decision_file.h"
#include "core/sysio.h"
#include "tests/unit/exp/search_test_util.h"

namespace dl::exp::search {
namespace {

class Decisions : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = temp_root(); }
  void TearDown() override { sys::remove_tree(dir_); }
  std::string dir_;
};

TEST_F(Decisions, NamedAfterTrialJobAndRung) {
  EXPECT_EQ(decision_path(dir_, "t001", "1234", 2), dir_ + "/t001.1234.r2");
}

TEST_F(Decisions, TheFirstDecisionHoldsAndNoTemporaryFileIsLeft) {
  const std::string path = decision_path(dir_, "t001", "1234", 0);
  const std::string go = decision::continue_text(1, 4);
  EXPECT_EQ(decide(path, go), go);
  EXPECT_EQ(decide(path, std::string(decision::kEnd)), go);  // the trial's "end", too late
  EXPECT_EQ(sys::list_dir(dir_), std::vector<std::string>{"t001.1234.r0"});
}

TEST_F(Decisions, ATrialWaitsUntilADecisionIsTaken) {
  const std::string path = decision_path(dir_, "t001", "1234", 0);
  EXPECT_FALSE(waits_for_decision(path));  // not at its rung's end yet
  sys::write_file_durably(path + std::string(decision::kWaitSuffix), "1\n");
  EXPECT_TRUE(waits_for_decision(path));
  decide(path, std::string(decision::kEnd));
  EXPECT_FALSE(waits_for_decision(path));
}

TEST_F(Decisions, DecidingAtOnceAllSeeTheSameDecision) {
  const std::string path = decision_path(dir_, "t001", "1234", 1);
  std::vector<std::string> seen(16);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < seen.size(); ++i) {
    threads.emplace_back([&, i] {
      seen[i] = decide(path, i % 2 ? std::string(decision::kEnd) : decision::continue_text(2, 8));
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), 1u);
  EXPECT_EQ(seen.front(), sys::read_file(path, 4096));
}

}  // namespace
}  // namespace dl::exp::search
