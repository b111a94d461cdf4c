// Running a command to its end: argv[0] looked up on PATH (unless it holds a '/'), stdin
// from /dev/null, stdout and stderr captured (or left to the caller's), bounded in time.
// dlrun's long-lived training program, with process groups and signals, is
// launcher/program.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dl {

struct CommandSpec {
  std::vector<std::string> argv;
  std::vector<std::string> env;                      // "NAME=value", over the caller's environment
  bool clean_env = false;                            // `env` alone
  bool capture = true;                               // false: the caller's stdout and stderr
  bool merge_stderr = false;                         // stderr into `out` (2>&1)
  std::optional<std::chrono::milliseconds> timeout;  // then killed with SIGKILL
  std::size_t max_output = SIZE_MAX;                 // per stream; the rest is read and dropped
};

struct CommandResult {
  int status = 0;  // the wait status (describe_wait_status, exit_code_of)
  bool timed_out = false;
  std::string out;
  std::string err;
};

// Throws dl::SystemError when the command cannot be started ("couldn't run gnuplot: No
// such file or directory").
CommandResult run_command(const CommandSpec& spec);

// "exited with 1", "killed by signal 9 (Killed)".
std::string describe_wait_status(int status);
// The shell's convention: the exit code, or 128 + the signal.
int exit_code_of(int status);

}  // namespace dl
