#include "ckpt/retention.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace dl::ckpt {
namespace {

using Steps = std::vector<std::uint64_t>;

std::vector<RetentionEntry> valid_steps(std::initializer_list<std::uint64_t> steps) {
  std::vector<RetentionEntry> out;
  for (auto s : steps) out.push_back({s, true, {}});
  return out;
}

TEST(CkptRetention, KeepsTheLastN) {
  EXPECT_EQ(steps_to_remove(valid_steps({100, 400, 200, 300}), {2, 0, "", false}),
            (Steps{100, 200}));
  EXPECT_EQ(steps_to_remove(valid_steps({100, 200}), {5, 0, "", false}), Steps{});
}

TEST(CkptRetention, ZeroKeepsEverything) {
  std::vector<RetentionEntry> e = valid_steps({1, 2, 3});
  e.push_back({0, false, {}});
  EXPECT_EQ(steps_to_remove(e, {0, 3, "loss", false}), Steps{});
}

TEST(CkptRetention, KeepsTheBestKByTheMetric) {
  std::vector<RetentionEntry> e = {{100, true, {{"loss", 0.5}}},
                                   {200, true, {{"loss", 0.3}}},
                                   {300, true, {{"loss", 0.4}}},
                                   {400, true, {{"loss", 0.9}}},
                                   {500, true, {}}};
  EXPECT_EQ(steps_to_remove(e, {1, 1, "loss", false}), (Steps{100, 300, 400}));
  EXPECT_EQ(steps_to_remove(e, {1, 2, "loss", false}), (Steps{100, 400}));
  EXPECT_EQ(steps_to_remove(e, {1, 1, "loss", true}), (Steps{100, 200, 300}));
}

TEST(CkptRetention, TiesGoToTheNewer) {
  std::vector<RetentionEntry> e = {
      {100, true, {{"acc", 1}}}, {200, true, {{"acc", 1}}}, {300, true, {}}};
  EXPECT_EQ(steps_to_remove(e, {1, 1, "acc", true}), (Steps{100}));
}

TEST(CkptRetention, NeverRemovesTheNewestValidCheckpoint) {
  // The newest is corrupt: the newest valid one (200) stays even with keep_last = 1 and
  // a best-K that prefers another.
  std::vector<RetentionEntry> e = {
      {100, true, {{"loss", 0.1}}}, {200, true, {{"loss", 0.9}}}, {300, false, {}}};
  EXPECT_EQ(steps_to_remove(e, {1, 1, "loss", false}), Steps{});
  EXPECT_EQ(steps_to_remove(e, {1, 0, "", false}), (Steps{100}));
}

TEST(CkptRetention, InvalidOnesOlderThanTheNewestValidGo) {
  std::vector<RetentionEntry> e = {{100, false, {}}, {200, true, {}}, {300, false, {}}};
  EXPECT_EQ(steps_to_remove(e, {3, 0, "", false}), (Steps{100}));
  EXPECT_EQ(steps_to_remove({{100, false, {}}, {200, false, {}}}, {1, 0, "", false}), Steps{});
}

TEST(CkptRetention, ANewerCheckpointWithCorruptDataDoesNotCountAsKept) {
  // All three look fine to the cheap check, but 300's data is corrupt: resume would take
  // 200, which must stay (and 300 is left for a human).
  std::vector<RetentionEntry> e = {{100, true, {}}, {200, true, {}}, {300, true, {}}};
  std::vector<std::uint64_t> asked;
  const auto passes = [&](std::uint64_t step) {
    asked.push_back(step);
    return step != 300;
  };
  EXPECT_EQ(steps_to_remove(e, {1, 0, "", false}, passes), (Steps{100}));
  EXPECT_EQ(asked, (Steps{300, 200}));  // newest first, stopping at the first that passes
}

TEST(CkptRetention, NothingGoesWhenNoCheckpointPassesTheResumeCheck) {
  std::vector<RetentionEntry> e = {{100, true, {}}, {200, true, {}}};
  EXPECT_EQ(steps_to_remove(e, {1, 0, "", false}, [](std::uint64_t) { return false; }), Steps{});
}

TEST(CkptRetention, TheResumeCheckRunsOnlyWhenSomethingWouldGo) {
  std::vector<RetentionEntry> e = {{100, true, {}}, {200, true, {}}};
  int calls = 0;
  const auto passes = [&](std::uint64_t) { return ++calls, true; };
  EXPECT_EQ(steps_to_remove(e, {2, 0, "", false}, passes), Steps{});
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(steps_to_remove(e, {1, 0, "", false}, passes), (Steps{100}));
  EXPECT_EQ(calls, 1);
}

TEST(CkptRetention, BestNeedsAMetricName) {
  EXPECT_THROW(validate_retention({1, 1, "", false}), InputError);
  EXPECT_THROW(steps_to_remove({}, {1, 1, "", false}), InputError);
}

}  // namespace
}  // namespace dl::ckpt
