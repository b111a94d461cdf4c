#include "core/process.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>

#include "core/error.h"

namespace dl {
namespace {

CommandResult sh(const std::string& script, CommandSpec spec = {}) {
  spec.argv = {"/bin/sh", "-c", script};
  return run_command(spec);
}

TEST(RunCommand, CapturesBothStreamsAndTheExitStatus) {
  const auto r = sh("echo out; echo err >&2; exit 3");
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_EQ(exit_code_of(r.status), 3);
  EXPECT_EQ(describe_wait_status(r.status), "exited with 3");
  EXPECT_FALSE(r.timed_out);
}

TEST(RunCommand, MergesStderrIntoStdout) {
  CommandSpec spec;
  spec.merge_stderr = true;
  const auto r = sh("echo a; echo b >&2", spec);
  EXPECT_EQ(r.out, "a\nb\n");
  EXPECT_EQ(r.err, "");
}

TEST(RunCommand, OverridesOrReplacesTheEnvironment) {
  ::setenv("DL_PROCESS_TEST", "caller", 1);
  CommandSpec spec;
  EXPECT_EQ(sh("echo $DL_PROCESS_TEST", spec).out, "caller\n");
  spec.env = {"DL_PROCESS_TEST=given"};
  EXPECT_EQ(sh("echo $DL_PROCESS_TEST", spec).out, "given\n");
  spec.env = {"OTHER=1"};
  spec.clean_env = true;
  EXPECT_EQ(sh("echo \"[$DL_PROCESS_TEST]\"", spec).out, "[]\n");
  ::unsetenv("DL_PROCESS_TEST");
}

TEST(RunCommand, StdinIsEmpty) { EXPECT_EQ(sh("cat; echo end").out, "end\n"); }

TEST(RunCommand, KillsACommandPastItsTimeout) {
  CommandSpec spec;
  spec.timeout = std::chrono::milliseconds(200);
  const auto r = sh("echo started; exec sleep 30", spec);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.out, "started\n");
  EXPECT_EQ(exit_code_of(r.status), 128 + SIGKILL);
  // The same without pipes to read.
  spec.capture = false;
  EXPECT_TRUE(sh("exec sleep 30", spec).timed_out);
}

TEST(RunCommand, KeepsAtMostMaxOutput) {
  CommandSpec spec;
  spec.max_output = 5;
  const auto r = sh("echo 0123456789; exit 0", spec);
  EXPECT_EQ(r.out, "01234");
  EXPECT_EQ(exit_code_of(r.status), 0);
}

TEST(RunCommand, SaysWhatCouldNotBeStarted) {
  CommandSpec spec;
  spec.argv = {"dl-no-such-command"};
  try {
    run_command(spec);
    FAIL();
  } catch (const SystemError& e) {
    EXPECT_STREQ(e.what(), "couldn't run dl-no-such-command: No such file or directory");
  }
}

}  // namespace
}  // namespace dl
