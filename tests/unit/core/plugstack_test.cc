#include "core/plugstack.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>

#include "core/error.h"
#include "core/spec.h"
#include "core/sysio.h"

namespace dl {
namespace {

TEST(Plugstack, ScanFindsTheArgumentsOfTheDlLine) {
  const auto scan = scan_plugstack(
      "# comment\n"
      "optional /usr/lib/spank/other.so max_gpus=1\n"
      "required /opt/dl/lib/spank_dl.so max_gpus=8 default_grace=60s  # ours\n"
      "include /etc/slurm/plugstack.conf.d/*.conf\n",
      "spank_dl.so");
  ASSERT_TRUE(scan.dl_args);
  EXPECT_EQ(*scan.dl_args, (std::vector<std::string>{"max_gpus=8", "default_grace=60s"}));
  EXPECT_EQ(scan.dl_line, 3u);
  EXPECT_EQ(scan.dl_kind, "required");
  EXPECT_EQ(scan.dl_plugin, "/opt/dl/lib/spank_dl.so");
  EXPECT_EQ(scan.includes, std::vector<std::string>{"/etc/slurm/plugstack.conf.d/*.conf"});
  EXPECT_EQ(parse_site_config(*scan.dl_args).max_gpus, 8u);

  EXPECT_FALSE(scan_plugstack("required /x/spank_dl.so.bak\n", "spank_dl.so").dl_args);
  const auto bare = scan_plugstack("required spank_dl.so", "spank_dl.so");
  ASSERT_TRUE(bare.dl_args);
  EXPECT_TRUE(bare.dl_args->empty());
}

// A plugstack.conf that includes a directory, with the plugin's line in one of its files.
class PlugstackCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dl-plugstack-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::mkdir((dir_ + "/plugstack.conf.d").c_str(), 0755);
    write("spank_dl.so", "");
    write("plugstack.conf", "include " + dir_ + "/plugstack.conf.d/*.conf\n");
  }
  void TearDown() override { sys::remove_tree(dir_); }

  void write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ + "/" + name) << text;
  }
  // dl.conf with this spank_dl.so line.
  void dl_line(const std::string& line) const {
    write("plugstack.conf.d/dl.conf", "# slurm-dl\n" + line + "\n");
  }
  std::string error_of() const {
    try {
      check_plugstack(dir_ + "/plugstack.conf");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }

  std::string dir_;
};

TEST_F(PlugstackCheck, GoodArgumentsAreReportedOk) {
  dl_line("optional " + dir_ + "/spank_dl.so max_gpus=512 default_ckpt_root=/scratch/ckpt");
  const auto report = check_plugstack(dir_ + "/plugstack.conf");
  ASSERT_GE(report.size(), 3u);
  EXPECT_EQ(report.front(), dir_ + "/plugstack.conf.d/dl.conf:2: optional " + dir_ +
                                "/spank_dl.so max_gpus=512 default_ckpt_root=/scratch/ckpt");
  EXPECT_NE(report[1].find("default_ckpt_root=/scratch/ckpt"), std::string::npos) << report[1];
  EXPECT_NE(report[1].find("max_gpus=512"), std::string::npos) << report[1];
  EXPECT_EQ(report.back(), "OK");
}

TEST_F(PlugstackCheck, ATypoNamesTheLineAndTheKey) {
  dl_line("required " + dir_ + "/spank_dl.so max_gpu=512");
  const std::string e = error_of();
  EXPECT_NE(e.find(dir_ + "/plugstack.conf.d/dl.conf:2: spank_dl.so would refuse to load"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("unknown key 'max_gpu'"), std::string::npos) << e;
}

TEST_F(PlugstackCheck, ABadValueIsTheParsersOwnMessage) {
  dl_line("required " + dir_ + "/spank_dl.so max_gpus=512 drain_after");
  EXPECT_NE(error_of().find("plugstack argument 'drain_after': expected key=value"),
            std::string::npos)
      << error_of();
}

TEST_F(PlugstackCheck, AMissingPluginOrLineIsAnError) {
  dl_line("required " + dir_ + "/lib/spank_dl.so");
  EXPECT_NE(error_of().find("lib/spank_dl.so: no such file"), std::string::npos) << error_of();
  write("plugstack.conf.d/dl.conf", "# nothing\n");
  EXPECT_NE(error_of().find("no line loads spank_dl.so"), std::string::npos) << error_of();
  sys::remove_tree(dir_ + "/plugstack.conf");
  EXPECT_NE(error_of().find(dir_ + "/plugstack.conf"), std::string::npos) << error_of();
}

TEST_F(PlugstackCheck, RootActionsNeedSlurmsTools) {
  dl_line("required " + dir_ + "/spank_dl.so drain_after=2 slurm_bindir=" + dir_);
  EXPECT_NE(error_of().find(dir_ + "/scontrol is not an executable file"), std::string::npos)
      << error_of();
  // Without the root actions, the tools are not needed.
  dl_line("required " + dir_ + "/spank_dl.so slurm_bindir=" + dir_);
  EXPECT_EQ(error_of(), "");
}

}  // namespace
}  // namespace dl
