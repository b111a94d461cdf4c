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

TEST(Submission, PlugstackArgumentsOfTheDlPlugin) {
  const auto scan = scan_plugstack(
      "# comment\n"
      "optional /usr/lib/spank/other.so max_gpus=1\n"
      "required /opt/dl/lib/spank_dl.so max_gpus=8 default_grace=60s  # ours\n"
      "include /etc/slurm/plugstack.conf.d/*.conf\n",
      "spank_dl.so");
  ASSERT_TRUE(scan.dl_args);
  EXPECT_EQ(*scan.dl_args, (std::vector<std::string>{"max_gpus=8", "default_grace=60s"}));
  EXPECT_EQ(scan.includes, std::vector<std::string>{"/etc/slurm/plugstack.conf.d/*.conf"});
  EXPECT_EQ(parse_site_config(*scan.dl_args).max_gpus, 8u);

  EXPECT_FALSE(scan_plugstack("required /x/spank_dl.so.bak\n", "spank_dl.so").dl_args);
  const auto bare = scan_plugstack("required spank_dl.so", "spank_dl.so");
  ASSERT_TRUE(bare.dl_args);
  EXPECT_TRUE(bare.dl_args->empty());
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
