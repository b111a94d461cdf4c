#include "launcher/program.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "core/signals.h"

namespace dl {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw SystemError(fmt::format("couldn't {}: {}", what, std::strerror(errno)));
}

void make_pipe(sys::Fd& read_end, sys::Fd& write_end) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) fail("create a pipe");
  read_end.reset(fds[0]);
  write_end.reset(fds[1]);
}

// Between fork and exec only async-signal-safe calls: dlrun may have threads (NCCL's
// bootstrap root) whose locks the child inherits.
[[noreturn]] void exec_child(char* const* argv, char* const* envp, const ProgramSpec& spec,
                             pid_t parent, int in_fd, int out_fd, int err_fd, int report_fd) {
  if (spec.own_process_group) setpgid(0, 0);
  // If dlrun dies (even by SIGKILL), the program must not go on unsupervised.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  for (const int sig : spec.ignored_signals) sigaction(sig, &ign, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (in_fd >= 0 && dup2(in_fd, STDIN_FILENO) < 0) _exit(127);
  if (out_fd >= 0 && dup2(out_fd, STDOUT_FILENO) < 0) _exit(127);
  if (err_fd >= 0 && dup2(err_fd, STDERR_FILENO) < 0) _exit(127);
  execvpe(argv[0], argv, envp);
  const int err = errno;
  ssize_t ignored = write(report_fd, &err, sizeof err);
  (void)ignored;
  _exit(127);
}

// Libraries dlrun uses (PMIx, NCCL) open descriptors without O_CLOEXEC.
void close_own_fds_at_exec(const ProgramSpec& spec) {
  for (const int fd : open_fds()) {
    if (fd <= STDERR_FILENO) continue;
    if (std::find(spec.pass_fds.begin(), spec.pass_fds.end(), fd) != spec.pass_fds.end()) continue;
    const int flags = fcntl(fd, F_GETFD);
    if (flags >= 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
}

}  // namespace

std::vector<int> open_fds() {
  std::vector<int> fds;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return fds;
  const int own = dirfd(dir);
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const int fd = std::atoi(e->d_name);
    if (fd != own) fds.push_back(fd);
  }
  closedir(dir);
  return fds;
}

Program Program::start(const ProgramSpec& spec) {
  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  Program p;
  sys::Fd out_write, err_write, report_read, report_write, in_read;
  if (spec.stdin_feed) {
    // A socket, not a pipe: dlrun writes with MSG_NOSIGNAL (no SIGPIPE once it is gone).
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) fail("create a socket pair");
    p.in_.reset(fds[0]);
    in_read.reset(fds[1]);
    if (shutdown(in_read.get(), SHUT_WR) != 0 || shutdown(p.in_.get(), SHUT_RD) != 0)
      fail("shut down half of a socket pair");
  }
  if (spec.capture_output) {
    make_pipe(p.out_, out_write);
    make_pipe(p.err_, err_write);
  }
  // The child reports a failed exec through this pipe; a successful exec closes it.
  make_pipe(report_read, report_write);
  close_own_fds_at_exec(spec);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) fail(fmt::format("start '{}'", spec.argv.at(0)));
  if (pid == 0) {
    exec_child(argv.data(), envp.data(), spec, parent, in_read.get(), out_write.get(),
               err_write.get(), report_write.get());
  }
  p.pid_ = pid;
  p.group_ = spec.own_process_group;
  // Also from the parent, so that the group exists before anyone signals it.
  if (spec.own_process_group) setpgid(pid, pid);
  in_read.reset();
  out_write.reset();
  err_write.reset();
  report_write.reset();
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(report_read.get(), &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  if (n == sizeof child_errno) {
    int status = 0;
    waitpid(pid, &status, 0);
    errno = child_errno;
    fail(fmt::format("run '{}'", spec.argv.at(0)));
  }
  return p;
}

void Program::signal(int sig) const {
  if (pid_ <= 0) return;
  if (group_) {
    ::kill(-pid_, sig);
  } else {
    ::kill(pid_, sig);
  }
}

bool Program::ignores(int sig) const {
  if (pid_ <= 0) return false;
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return status_ignores(text, sig);
}

std::optional<int> Program::reap() {
  if (pid_ <= 0) return std::nullopt;
  // Look without reaping first: while the program is a zombie its process group id
  // cannot be reused, so workers it left behind can still be killed by group.
  siginfo_t info{};
  int r;
  do {
    r = waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT);
  } while (r < 0 && errno == EINTR);
  if (r != 0 || info.si_pid != pid_) return std::nullopt;
  if (group_) ::kill(-pid_, SIGKILL);
  int status = 0;
  pid_t w;
  do {
    w = waitpid(pid_, &status, 0);
  } while (w < 0 && errno == EINTR);
  pid_ = -1;
  return status;
}

}  // namespace dl
