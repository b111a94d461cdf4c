#include "core/spec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "config.h"
#include "core/error.h"

namespace dl {
namespace {

using std::chrono::seconds;

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

const EnvLookup no_env = env_of({});

std::string error_of(const RawOptions& raw, const EnvLookup& env = no_env,
                     const SiteConfig& site = {}) {
  try {
    make_spec(raw, env, site, "/home/alice");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(Spec, NothingAskedIsNotADlJob) {
  EXPECT_FALSE(make_spec({}, no_env, {}, "/home/alice"));
  EXPECT_FALSE(make_spec({}, env_of({{"PATH", "/bin"}, {"DLX", "1"}}), {}, "/home/alice"));
}

TEST(Spec, RequestedByAnOptionAVariableOrTheMarkerOnly) {
  EXPECT_FALSE(spec_requested({}, no_env));
  EXPECT_FALSE(spec_requested({}, env_of({{"PATH", "/bin"}, {"DLX", "1"}, {"DL_", "1"}})));
  EXPECT_TRUE(spec_requested({{"dl-preemptible", ""}}, no_env));
  EXPECT_TRUE(spec_requested({{"dl-gpus", "2"}}, no_env));
  EXPECT_TRUE(spec_requested({}, env_of({{"DL_GPUS", "2"}})));
  EXPECT_TRUE(spec_requested({}, env_of({{"DL_WATCHDOG", "0"}})));
  EXPECT_TRUE(spec_requested({}, env_of({{kSpecMarker, "1"}})));
  // Every option's variable counts, as make_spec reads each of them.
  for (const auto& o : option_infos()) {
    EXPECT_TRUE(spec_requested({}, env_of({{o.env, "1"}}))) << o.env;
  }
}

TEST(Spec, DefaultsWhenOnlyGpusGiven) {
  const auto spec = make_spec({{"dl-gpus", "8"}}, no_env, {}, "/home/alice");
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->gpus, 8u);
  EXPECT_EQ(spec->placement, Placement::pack);
  EXPECT_EQ(spec->ckpt_keep, 3u);
  EXPECT_EQ(spec->grace, seconds(120));
  EXPECT_EQ(spec->max_restarts, 3u);
  EXPECT_FALSE(spec->preemptible);
  EXPECT_FALSE(spec->ckpt_every);
  EXPECT_FALSE(spec->elastic);
  EXPECT_EQ(spec->watchdog, seconds(0));
  EXPECT_EQ(spec->ckpt_dir, "");
}

TEST(Spec, EveryOptionParsed) {
  const auto spec = make_spec({{"dl-gpus", "16"},
                               {"dl-placement", "switch"},
                               {"dl-ckpt-dir", "/home/alice//runs/x/"},
                               {"dl-ckpt-every", "30m"},
                               {"dl-ckpt-keep", "5"},
                               {"dl-preemptible", ""},
                               {"dl-grace", "90s"},
                               {"dl-max-restarts", "0"},
                               {"dl-elastic", "8:16"},
                               {"dl-experiment", "resnet.v2"},
                               {"dl-trial", "17"},
                               {"dl-watchdog", "10m"}},
                              no_env, {}, "/home/alice");
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->gpus, 16u);
  EXPECT_EQ(spec->placement, Placement::leaf_switch);
  EXPECT_EQ(spec->ckpt_dir, "/home/alice/runs/x");
  EXPECT_EQ(spec->ckpt_every, seconds(1800));
  EXPECT_EQ(spec->ckpt_keep, 5u);
  EXPECT_TRUE(spec->preemptible);
  EXPECT_EQ(spec->grace, seconds(90));
  EXPECT_EQ(spec->max_restarts, 0u);
  EXPECT_EQ(spec->elastic->min, 8u);
  EXPECT_EQ(spec->elastic->max, 16u);
  EXPECT_EQ(spec->experiment, "resnet.v2");
  EXPECT_EQ(spec->trial, "17");
  EXPECT_EQ(spec->watchdog, seconds(600));
}

TEST(Spec, EnvironmentGivesDefaultsAndOptionsWin) {
  const auto spec =
      make_spec({{"dl-gpus", "4"}},
                env_of({{"DL_GPUS", "2"}, {"DL_PREEMPTIBLE", "yes"}, {"DL_PLACEMENT", "spread"}}),
                {}, "/home/alice");
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->gpus, 4u);
  EXPECT_TRUE(spec->preemptible);
  EXPECT_EQ(spec->placement, Placement::spread);
  EXPECT_EQ(make_spec({{"dl-gpus", "4"}, {"dl-placement", "even"}}, env_of({}), {}, "/home/alice")
                ->placement,
            Placement::even);
  EXPECT_EQ(error_of({}, env_of({{"DL_PREEMPTIBLE", "maybe"}})),
            "DL_PREEMPTIBLE=maybe: expected 1/yes/true or 0/no/false");
}

TEST(Spec, ElasticSetsGpusToMaxAndBoundsThem) {
  auto spec = make_spec({{"dl-elastic", "2:8"}}, no_env, {}, "/h");
  EXPECT_EQ(spec->gpus, 8u);
  EXPECT_EQ(error_of({{"dl-gpus", "16"}, {"dl-elastic", "2:8"}}),
            "--dl-gpus=16: outside the range --dl-elastic=2:8");
}

struct BadCase {
  RawOptions raw;
  const char* message;
};

class SpecRejects : public testing::TestWithParam<BadCase> {};

TEST_P(SpecRejects, WithOneMessage) { EXPECT_EQ(error_of(GetParam().raw), GetParam().message); }

INSTANTIATE_TEST_SUITE_P(
    EveryOption, SpecRejects,
    testing::Values(
        BadCase{{{"dl-gpus", "abc"}}, "--dl-gpus=abc: expected a whole number from 1 to 64"},
        BadCase{{{"dl-gpus", "0"}}, "--dl-gpus=0: expected a whole number from 1 to 64"},
        BadCase{{{"dl-gpus", "65"}}, "--dl-gpus=65: expected a whole number from 1 to 64"},
        BadCase{{{"dl-gpus", ""}}, "--dl-gpus=: expected a whole number from 1 to 64"},
        BadCase{{{"dl-placement", "random"}},
                "--dl-placement=random: expected one of pack, spread, switch, even"},
        BadCase{{{"dl-ckpt-dir", "relative/dir"}},
                "--dl-ckpt-dir=relative/dir: expected an absolute path"},
        BadCase{{{"dl-ckpt-dir", "/home/alice/../bob"}},
                "--dl-ckpt-dir=/home/alice/../bob: '.' and '..' are not allowed in the path"},
        BadCase{{{"dl-ckpt-dir", "/etc/cron.d"}},
                "--dl-ckpt-dir=/etc/cron.d: not under an allowed checkpoint root "
                "(/var/tmp/slurm-dl, /home/alice)"},
        BadCase{{{"dl-ckpt-dir", "/home/alicex/y"}},
                "--dl-ckpt-dir=/home/alicex/y: not under an allowed checkpoint root "
                "(/var/tmp/slurm-dl, /home/alice)"},
        BadCase{{{"dl-ckpt-dir", "/"}},
                "--dl-ckpt-dir=/: the root directory cannot be a checkpoint directory"},
        BadCase{{{"dl-ckpt-dir", "/home/alice/a\nb"}},
                "--dl-ckpt-dir=/home/alice/a\nb: control characters are not allowed in the path"},
        BadCase{{{"dl-ckpt-every", "soon"}},
                "--dl-ckpt-every=soon: expected a duration such as 90s, 30m or 2h, from 1s to 30d"},
        BadCase{{{"dl-ckpt-every", "0"}},
                "--dl-ckpt-every=0: expected a duration such as 90s, 30m or 2h, from 1s to 30d"},
        BadCase{{{"dl-ckpt-keep", "0"}},
                "--dl-ckpt-keep=0: expected a whole number from 1 to 1000"},
        BadCase{{{"dl-grace", "2d"}},
                "--dl-grace=2d: expected a duration such as 90s, 30m or 2h, from 1s to 1d"},
        BadCase{{{"dl-max-restarts", "-1"}},
                "--dl-max-restarts=-1: expected a whole number from 0 to 1000"},
        BadCase{{{"dl-elastic", "8"}},
                "--dl-elastic=8: expected MIN:MAX, two whole numbers from 1 to 64 with MIN <= "
                "MAX"},
        BadCase{{{"dl-elastic", "8:2"}},
                "--dl-elastic=8:2: expected MIN:MAX, two whole numbers from 1 to 64 with MIN <= "
                "MAX"},
        BadCase{{{"dl-elastic", "0:2"}},
                "--dl-elastic=0:2: expected MIN:MAX, two whole numbers from 1 to 64 with MIN <= "
                "MAX"},
        BadCase{{{"dl-experiment", "my exp"}},
                "--dl-experiment=my exp: expected 1 to 64 letters, digits, '.', '_' or '-', not "
                "starting with '.'"},
        BadCase{{{"dl-trial", ".."}},
                "--dl-trial=..: expected 1 to 64 letters, digits, '.', '_' or '-', not starting "
                "with '.'"},
        BadCase{{{"dl-trial", ""}},
                "--dl-trial=: expected 1 to 64 letters, digits, '.', '_' or '-', not starting with "
                "'.'"},
        BadCase{{{"dl-watchdog", "1y"}},
                "--dl-watchdog=1y: expected a duration such as 90s, 30m or 2h, from 0s to 30d"},
        BadCase{{{"dl-bogus", "1"}}, "--dl-bogus: not a slurm-dl option"}));

TEST(Spec, SiteLimitsApply) {
  SiteConfig site =
      parse_site_config({"max_gpus=8", "default_grace=5m", "default_ckpt_root=/scratch/ckpt",
                         "allowed_ckpt_roots=/scratch,~"});
  EXPECT_EQ(error_of({{"dl-gpus", "9"}}, no_env, site),
            "--dl-gpus=9: expected a whole number from 1 to 8");
  const auto spec =
      make_spec({{"dl-gpus", "8"}, {"dl-ckpt-dir", "/scratch/a"}}, no_env, site, "/home/alice");
  EXPECT_EQ(spec->grace, seconds(300));
  EXPECT_EQ(default_ckpt_dir(site, "alice", "my job/1"), "/scratch/ckpt/alice/my_job_1");
  EXPECT_EQ(default_ckpt_dir(site, "alice", ".."), "/scratch/ckpt/alice/job");
}

TEST(Spec, DownFailedBatchHostIsOffUnlessTheSiteSaysYes) {
  EXPECT_FALSE(parse_site_config({}).down_failed_batch_host);
  EXPECT_TRUE(parse_site_config({"down_failed_batch_host=yes"}).down_failed_batch_host);
  EXPECT_FALSE(parse_site_config({"down_failed_batch_host=no"}).down_failed_batch_host);
}

TEST(Spec, SiteConfigErrorsNameTheKey) {
  const auto error = [](std::vector<std::string> args) {
    try {
      parse_site_config(args);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(error({"max_gpu=8"}),
            "plugstack argument 'max_gpu=8': unknown key 'max_gpu' (expected "
            "default_ckpt_root, allowed_ckpt_roots, max_gpus, default_grace, shared_ckpt_root, "
            "drain_after, drain_state_dir, down_failed_batch_host, gpu_metrics or slurm_bindir)");
  EXPECT_EQ(error({"down_failed_batch_host=maybe"}),
            "down_failed_batch_host=maybe: expected 1/yes/true or 0/no/false");
  EXPECT_EQ(error({"drain_after=99"}), "drain_after=99: expected a whole number from 0 to 16");
  EXPECT_EQ(error({"drain_state_dir=spool"}), "drain_state_dir=spool: expected an absolute path");
  EXPECT_EQ(error({"max_gpus=lots"}), "max_gpus=lots: expected a whole number from 1 to 1048576");
  EXPECT_EQ(error({"default_grace=never"}),
            "default_grace=never: expected a duration such as 90s, 30m or 2h, from 1s to 1d");
  EXPECT_EQ(error({"default_ckpt_root=tmp"}), "default_ckpt_root=tmp: expected an absolute path");
  EXPECT_EQ(error({"allowed_ckpt_roots=/a,b"}), "allowed_ckpt_roots=b: expected an absolute path");
  EXPECT_EQ(error({"verbose"}), "plugstack argument 'verbose': expected key=value");
  EXPECT_EQ(error({"gpu_metrics=on"}), "gpu_metrics=on: expected off or an absolute path");
  EXPECT_EQ(error({"gpu_metrics="}), "gpu_metrics=: expected off or an absolute path");
  EXPECT_EQ(error({"slurm_bindir=bin"}), "slurm_bindir=bin: expected an absolute path");
}

// The root actions run Slurm's commands from where this build found them, unless the
// site says otherwise.
TEST(Spec, SlurmToolsAreWhereConfigureFoundThem) {
  EXPECT_EQ(slurm_tool_path(parse_site_config({}), "scontrol"),
            std::string(DL_SLURM_BINDIR) + "/scontrol");
  EXPECT_EQ(slurm_tool_path(parse_site_config({"slurm_bindir=/opt/slurm/bin/"}), "sinfo"),
            "/opt/slurm/bin/sinfo");
}

TEST(Spec, GpuMetricsIsOffUnlessADirectoryIsGiven) {
  EXPECT_EQ(parse_site_config({}).gpu_metrics_dir, "");
  EXPECT_EQ(parse_site_config({"gpu_metrics=/run/slurm-dl-gpus"}).gpu_metrics_dir,
            "/run/slurm-dl-gpus");
  EXPECT_EQ(parse_site_config({"gpu_metrics=/run/x", "gpu_metrics=off"}).gpu_metrics_dir, "");
}

TEST(Spec, RoundTripsThroughTheEnvironment) {
  const auto spec = make_spec({{"dl-gpus", "6"},
                               {"dl-placement", "spread"},
                               {"dl-ckpt-every", "1h30m"},
                               {"dl-preemptible", ""},
                               {"dl-elastic", "2:6"},
                               {"dl-experiment", "e1"},
                               {"dl-trial", "t-3"}},
                              no_env, {}, "/home/alice");
  Spec resolved = *spec;
  resolved.ckpt_dir = "/var/tmp/slurm-dl/alice/job";
  std::map<std::string, std::string> vars;
  for (const auto& [k, v] : resolved.to_env()) vars[k] = v;
  EXPECT_EQ(vars.at("DL_CKPT_EVERY"), "5400");
  EXPECT_EQ(vars.at("DL_PREEMPTIBLE"), "1");
  EXPECT_EQ(vars.at("DL_SPEC_VERSION"), "1");
  const auto back = spec_from_env(env_of(vars));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->to_env(), resolved.to_env());
}

TEST(Spec, FromEnvNeedsTheMarker) {
  EXPECT_FALSE(spec_from_env(env_of({{"DL_GPUS", "4"}})));
  EXPECT_THROW(spec_from_env(env_of({{"DL_SPEC_VERSION", "1"}, {"DL_GPUS", "x"}})), InputError);
  EXPECT_THROW(spec_from_env(env_of({{"DL_SPEC_VERSION", "9"}})), InputError);
}

TEST(Spec, ConflictsWithTheNativeRequest) {
  Spec spec;
  spec.gpus = 8;
  spec.grace = seconds(120);
  EXPECT_NO_THROW(check_against_request(spec, {seconds(3600), 8}));
  EXPECT_NO_THROW(check_against_request(spec, {std::nullopt, std::nullopt}));
  try {
    check_against_request(spec, {seconds(120), std::nullopt});
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "--dl-grace=2m: must be shorter than the time limit (2m)");
  }
  try {
    check_against_request(spec, {std::nullopt, 4});
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "--dl-gpus=8: contradicts the 4 GPUs asked with --gpus/--gres=gpu; give only "
                 "--dl-gpus");
  }
}

TEST(Spec, AllowedRootsCompareWholeComponents) {
  SiteConfig site;
  EXPECT_TRUE(ckpt_dir_allowed(site, "/var/tmp/slurm-dl/a/b", "/home/u"));
  EXPECT_TRUE(ckpt_dir_allowed(site, "/home/u", "/home/u"));
  EXPECT_FALSE(ckpt_dir_allowed(site, "/var/tmp/slurm-dlx", "/home/u"));
  EXPECT_FALSE(ckpt_dir_allowed(site, "/home", "/home/u"));
}

TEST(Spec, EveryOptionHasHelpAndAVariable) {
  for (const auto& o : option_infos()) {
    EXPECT_EQ(std::string(o.name).rfind("dl-", 0), 0u);
    EXPECT_EQ(std::string(o.env).rfind("DL_", 0), 0u);
    EXPECT_GT(std::string(o.help).size(), 10u);
  }
  EXPECT_EQ(option_infos().size(), 13u);
}

TEST(Spec, PlacementHelpNamesEveryPlacement) {
  const auto& infos = option_infos();
  const auto it = std::find_if(infos.begin(), infos.end(), [](const OptionInfo& o) {
    return std::string_view(o.name) == "dl-placement";
  });
  ASSERT_NE(it, infos.end());
  for (const auto p :
       {Placement::pack, Placement::spread, Placement::leaf_switch, Placement::even}) {
    const std::string name(to_string(p));
    EXPECT_NE(std::string(it->arg).find(name), std::string::npos) << name;
    EXPECT_NE(std::string(it->help).find(name + ":"), std::string::npos) << name;
  }
}

TEST(Spec, GraceUsageShowsTheSitesDefault) {
  SiteConfig site;
  site.default_grace = seconds(300);
  for (const auto& o : option_infos()) {
    const std::string usage = option_usage(o, site);
    if (std::string_view(o.name) == "dl-grace") {
      EXPECT_EQ(usage, "time needed to write a checkpoint (default 300s)");
    } else {
      EXPECT_EQ(usage, o.help) << o.name;
    }
  }
}

}  // namespace
}  // namespace dl

namespace dl {
namespace {

TEST(Spec, DefaultCheckpointDirectoryIsUniquePerJobAndArrayTask) {
  const SiteConfig site = parse_site_config({"default_ckpt_root=/scratch/ckpt"});
  EXPECT_EQ(ckpt_job_key(4711, std::nullopt, std::nullopt), "4711");
  EXPECT_EQ(ckpt_job_key(4712, 4700u, 3u), "4700_3");
  EXPECT_EQ(default_ckpt_dir(site, "alice", ckpt_job_key(4712, 4700u, 3u)),
            "/scratch/ckpt/alice/4700_3");
  EXPECT_NE(default_ckpt_dir(site, "alice", ckpt_job_key(4712, 4700u, 3u)),
            default_ckpt_dir(site, "alice", ckpt_job_key(4713, 4700u, 4u)));
  EXPECT_TRUE(is_ckpt_job_key("4711"));
  EXPECT_TRUE(is_ckpt_job_key("4700_3"));
  EXPECT_FALSE(is_ckpt_job_key("47_"));
  EXPECT_FALSE(is_ckpt_job_key("../x"));
}

TEST(Spec, ResumeFromTakesAJobIdOrAnAllowedDirectory) {
  const SiteConfig site =
      parse_site_config({"default_ckpt_root=/scratch/ckpt", "allowed_ckpt_roots=/scratch,~"});
  const auto none = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  auto spec = make_spec({{"dl-resume-from", "4711"}}, none, site, "/home/alice");
  EXPECT_EQ(resolve_resume_from(site, "alice", spec->resume_from), "/scratch/ckpt/alice/4711");
  spec = make_spec({{"dl-resume-from", "/scratch/x//y"}}, none, site, "/home/alice");
  EXPECT_EQ(spec->resume_from, "/scratch/x/y");
  const auto env = spec->to_env();
  EXPECT_NE(std::find(env.begin(), env.end(),
                      std::pair<std::string, std::string>{"DL_CKPT_RESUME_FROM", "/scratch/x/y"}),
            env.end());
  try {
    make_spec({{"dl-resume-from", "/etc/x"}}, none, site, "/home/alice");
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "--dl-resume-from=/etc/x: not under an allowed checkpoint root (/scratch, "
                 "/home/alice)");
  }
  try {
    make_spec({{"dl-resume-from", "last"}}, none, site, "/home/alice");
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--dl-resume-from=last: expected a job id"),
              std::string::npos);
  }
}

TEST(Spec, FileSystemTypesAreClassified) {
  EXPECT_EQ(classify_fs_type(0x6969).name, "nfs");
  EXPECT_EQ(classify_fs_type(0x6969).sharing, FsSharing::shared);
  EXPECT_EQ(classify_fs_type(0x0BD00BD0).sharing, FsSharing::shared);  // lustre
  EXPECT_EQ(classify_fs_type(0x47504653).sharing, FsSharing::shared);  // gpfs
  EXPECT_EQ(classify_fs_type(0x19830326).sharing, FsSharing::shared);  // beegfs
  EXPECT_EQ(classify_fs_type(0x00C36400).sharing, FsSharing::shared);  // cephfs
  EXPECT_EQ(classify_fs_type(0xEF53).name, "ext4");
  EXPECT_EQ(classify_fs_type(0xEF53).sharing, FsSharing::local);
  EXPECT_EQ(classify_fs_type(0x58465342).sharing, FsSharing::local);  // xfs
  EXPECT_EQ(classify_fs_type(0x01021994).sharing, FsSharing::local);  // tmpfs
  EXPECT_EQ(classify_fs_type(0x12345678).name, "0x12345678");
  EXPECT_EQ(classify_fs_type(0x12345678).sharing, FsSharing::unknown);
  EXPECT_EQ(parse_site_config({"shared_ckpt_root=yes"}).shared_ckpt_root, true);
  EXPECT_EQ(parse_site_config({"shared_ckpt_root=no"}).shared_ckpt_root, false);
  EXPECT_EQ(parse_site_config({"shared_ckpt_root=auto"}).shared_ckpt_root, std::nullopt);
  EXPECT_THROW(parse_site_config({"shared_ckpt_root=maybe"}), InputError);
}

}  // namespace
}  // namespace dl
