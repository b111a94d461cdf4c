#include "sched/submission.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/spec.h"

namespace dl {
namespace {

TEST(Submission, PartitionListsAreDedupedAndBounded) {
  EXPECT_EQ(partition_names("low,high,low,,high"), (std::vector<std::string>{"low", "high"}));
  EXPECT_EQ(partition_names(""), std::vector<std::string>{});
  std::string many;
  for (std::size_t i = 0; i < kMaxPartitions; ++i) many += "p" + std::to_string(i) + ",";
  EXPECT_EQ(partition_names(many).size(), kMaxPartitions);
  try {
    partition_names(many + "one-more");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("at most 64 partitions"), std::string::npos) << e.what();
  }
  // The same name ten thousand times is refused by its length, before any work.
  std::string repeated;
  for (int i = 0; i < 10000; ++i) repeated += "low,";
  EXPECT_THROW(partition_names(repeated), InputError);
}

TEST(Submission, SpankEnvironmentIsBounded) {
  EXPECT_NO_THROW(check_spank_env_size(kMaxSpankEnvEntries, kMaxSpankEnvEntry));
  EXPECT_THROW(check_spank_env_size(kMaxSpankEnvEntries + 1, 10), InputError);
  EXPECT_THROW(check_spank_env_size(3, kMaxSpankEnvEntry + 1), InputError);
}

// What the SPANK plugin hands the controller, read back with the site's limits: the
// controller's check (make_spec over the job's SPANK environment) accepts every spec
// the SPANK plugin writes and refuses one beyond the site's limits.
TEST(Submission, TheControllerReChecksTheSpecWithTheSiteLimits) {
  SiteConfig site = parse_site_config({"max_gpus=8"});
  const RawOptions raw = {{"dl-gpus", "8"},           {"dl-preemptible", ""},
                          {"dl-ckpt-every", "10m"},   {"dl-grace", "90s"},
                          {"dl-experiment", "exp-1"}, {"dl-max-restarts", "5"}};
  const auto none = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  const auto spec = make_spec(raw, none, site, "/home/u");
  ASSERT_TRUE(spec);
  const auto env = spec->to_env();
  const auto lookup = [&](const std::string& name) -> std::optional<std::string> {
    for (const auto& [k, v] : env) {
      if (k == name) return v;
    }
    return std::nullopt;
  };
  const auto again = make_spec({}, lookup, site, "/home/u");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->to_env(), env);

  // The same variables set by hand, beyond the site's max_gpus.
  const auto forged = [&](const std::string& name) -> std::optional<std::string> {
    if (name == "DL_GPUS") return std::string("999");
    return lookup(name);
  };
  try {
    make_spec({}, forged, site, "/home/u");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("DL_GPUS"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("8"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dl
