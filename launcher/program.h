// The training program dlrun runs: started with the environment dlrun built, in its own
// process group (so that stopping it stops its workers too), killed if dlrun dies, and
// shielded from the signals Slurm sends to every process of the step (dlrun owns them;
// the program gets one checkpoint request instead).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "core/sysio.h"

namespace dl {

struct ProgramSpec {
  std::vector<std::string> argv;
  std::vector<std::string> env;      // "NAME=value"
  std::vector<int> ignored_signals;  // SIG_IGN survives exec and reaches its children
  bool capture_output = true;        // stdout/stderr through pipes (for the prefix)
  bool own_process_group = true;     // false for an interactive program on a terminal
  // stdin from a socket whose other end is Program::stdin_feed() (for a program that must
  // not be in the terminal's foreground process group but wants its input).
  bool stdin_feed = false;
  // Descriptors beyond 0-2 the program gets (those dlrun itself inherited from
  // slurmstepd); dlrun's own (PMIx, NCCL, its control connection) are closed at exec.
  std::vector<int> pass_fds;
};

// The descriptors open in this process now (/proc/self/fd).
std::vector<int> open_fds();

class Program {
 public:
  // Throws dl::SystemError when the program cannot be started, naming it and the reason
  // (e.g. "couldn't run 'trian.py': No such file or directory").
  static Program start(const ProgramSpec& spec);

  Program(Program&&) = default;
  Program& operator=(Program&&) = default;

  pid_t pid() const { return pid_; }
  sys::Fd& stdout_pipe() { return out_; }
  sys::Fd& stderr_pipe() { return err_; }
  sys::Fd& stdin_feed() { return in_; }

  // To the whole process group when the program has one, else to the program.
  void signal(int sig) const;

  // Whether the program ignores `sig` (/proc/<pid>/status); false once it has exited.
  bool ignores(int sig) const;

  // The wait status once the program has exited (waitpid WNOHANG).
  std::optional<int> reap();

 private:
  Program() = default;
  pid_t pid_ = -1;
  bool group_ = false;
  sys::Fd out_;
  sys::Fd err_;
  sys::Fd in_;
};

}  // namespace dl
