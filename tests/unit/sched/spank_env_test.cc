#include "sched/spank_env.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "sched/submission.h"

namespace dl {
namespace {

// The strings as a char** the way Slurm's records hold them.
struct Env {
  explicit Env(std::vector<std::string> entries) : strings(std::move(entries)) {
    for (auto& s : strings) pointers.push_back(s.data());
  }
  std::vector<std::string> strings;
  std::vector<char*> pointers;
  const char* const* data() const { return pointers.data(); }
  std::size_t size() const { return pointers.size(); }
};

TEST(SpankEnvLookup, FindsTheWholeNameOnly) {
  const Env env({"DL_GPUSX=9", "OTHER=1", "DL_GPUS=4", "DL_GPUS=5"});
  const EnvLookup lookup = spank_env_lookup(env.data(), env.size());
  EXPECT_EQ(lookup("DL_GPUS"), "4");
  EXPECT_EQ(lookup("DL_GPU"), std::nullopt);
  EXPECT_EQ(lookup("OTHER"), "1");
  EXPECT_EQ(spank_env_lookup(nullptr, 3)("DL_GPUS"), std::nullopt);
}

TEST(SpankEnvLookup, ReadsNoMoreThanAJobMayHave) {
  std::vector<std::string> many(kMaxSpankEnvEntries, "X=1");
  many.push_back("DL_SPEC_VERSION=1");
  many.push_back("DL_GPUS=2");
  const Env env(many);
  const EnvLookup lookup = spank_env_lookup(env.data(), env.size());
  EXPECT_EQ(lookup("DL_SPEC_VERSION"), std::nullopt);
  EXPECT_FALSE(spank_env_spec(env.data(), env.size()).has_value());
  const Env long_value({"DL_TRIAL=" + std::string(kMaxSpankEnvEntry + 100, 'a')});
  EXPECT_EQ(spank_env_lookup(long_value.data(), long_value.size())("DL_TRIAL")->size(),
            kMaxSpankEnvEntry);
}

// The spellings job_submit/dl accepts from a client that skips the SPANK plugin, which
// preempt/dl once read with rules of its own ("yes" not preemptible, "30m" 30 seconds).
TEST(SpankEnvSpec, ReadsEverySpellingTheSubmitCheckAccepts) {
  for (const char* yes : {"1", "yes", "YES", "true", "True"}) {
    const Env env({"DL_SPEC_VERSION=1", "DL_GPUS=2", std::string("DL_PREEMPTIBLE=") + yes,
                   "DL_CKPT_EVERY=30m"});
    const auto spec = spank_env_spec(env.data(), env.size());
    ASSERT_TRUE(spec) << yes;
    EXPECT_TRUE(spec->preemptible) << yes;
    EXPECT_EQ(spec->ckpt_every, std::chrono::seconds(1800)) << yes;
  }
  const Env no({"DL_SPEC_VERSION=1", "DL_GPUS=2", "DL_PREEMPTIBLE=no"});
  EXPECT_FALSE(spank_env_spec(no.data(), no.size())->preemptible);
  const Env bad({"DL_SPEC_VERSION=1", "DL_PREEMPTIBLE=maybe"});
  EXPECT_THROW(spank_env_spec(bad.data(), bad.size()), InputError);
  const Env plain({"OTHER=1"});
  EXPECT_FALSE(spank_env_spec(plain.data(), plain.size()).has_value());
}

TEST(NormalizedSpankEnv, TheSpecFirstInCanonicalFormThenTheRest) {
  const Env env({"A=1", "DL_SPEC_VERSION=1", "DL_PREEMPTIBLE=yes", "DL_GPUSX=7", "DL_GPUS=2",
                 "DL_CKPT_EVERY=30m", "B=2"});
  const auto spec = spank_env_spec(env.data(), env.size());
  ASSERT_TRUE(spec);
  const std::vector<std::string> got = normalized_spank_env(env.data(), env.size(), *spec);
  std::vector<std::string> want;
  for (const auto& [name, value] : spec->to_env()) want.push_back(name + "=" + value);
  want.insert(want.end(), {"A=1", "DL_GPUSX=7", "B=2"});
  EXPECT_EQ(got, want);
  const Env normal(got);
  const EnvLookup lookup = spank_env_lookup(normal.data(), normal.size());
  EXPECT_EQ(lookup("DL_PREEMPTIBLE"), "1");
  EXPECT_EQ(lookup("DL_CKPT_EVERY"), "1800");
  EXPECT_EQ(lookup("DL_SPEC_VERSION"), "1");
  // Read back, the same spec.
  EXPECT_EQ(spank_env_spec(normal.data(), normal.size())->to_env(), spec->to_env());
}

}  // namespace
}  // namespace dl
