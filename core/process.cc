#include "core/process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "core/error.h"
#include "core/sysio.h"

extern char** environ;

namespace dl {
namespace {

void make_pipe(sys::Fd& read_end, sys::Fd& write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw SystemError(fmt::format("couldn't create a pipe: {}", std::strerror(errno)));
  }
  read_end.reset(fds[0]);
  write_end.reset(fds[1]);
}

std::vector<std::string> environment_of(const CommandSpec& spec) {
  if (spec.clean_env) return spec.env;
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    const std::string_view v(*e);
    const bool replaced = std::any_of(spec.env.begin(), spec.env.end(), [&](const std::string& s) {
      return v.rfind(s.substr(0, s.find('=') + 1), 0) == 0;
    });
    if (!replaced) out.emplace_back(v);
  }
  out.insert(out.end(), spec.env.begin(), spec.env.end());
  return out;
}

using Clock = std::chrono::steady_clock;

// Reads both pipes to their ends; false when `until` came first.
bool drain(sys::Fd& out, sys::Fd& err, CommandResult& r, const CommandSpec& spec,
           Clock::time_point until) {
  pollfd fds[2] = {{out.get(), POLLIN, 0}, {err.get(), POLLIN, 0}};
  std::string* into[2] = {&r.out, &r.err};
  char buf[4096];
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    int wait_ms = -1;
    if (spec.timeout) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
      if (left.count() <= 0) return false;
      wait_ms = static_cast<int>(std::min<long long>(left.count(), 1000));
    }
    if (::poll(fds, 2, wait_ms) < 0) {
      if (errno == EINTR) continue;
      throw SystemError(
          fmt::format("couldn't read the output of {}: {}", spec.argv.at(0), std::strerror(errno)));
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        const std::size_t room = spec.max_output - std::min(spec.max_output, into[i]->size());
        into[i]->append(buf, std::min(room, static_cast<std::size_t>(n)));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;
      }
    }
  }
  return true;
}

void reap(pid_t pid, int& status) {
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

// false when `until` came first.
bool reap_until(pid_t pid, int& status, Clock::time_point until) {
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR)) return true;
    if (Clock::now() >= until) return false;
    ::usleep(20000);
  }
}

}  // namespace

CommandResult run_command(const CommandSpec& spec) {
  const std::vector<std::string> env = environment_of(spec);
  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  sys::Fd out_read, out_write, err_read, err_write;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (spec.capture) {
    make_pipe(out_read, out_write);
    posix_spawn_file_actions_adddup2(&fa, out_write.get(), STDOUT_FILENO);
    if (spec.merge_stderr) {
      posix_spawn_file_actions_adddup2(&fa, out_write.get(), STDERR_FILENO);
    } else {
      make_pipe(err_read, err_write);
      posix_spawn_file_actions_adddup2(&fa, err_write.get(), STDERR_FILENO);
    }
  }
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  out_write.reset();
  err_write.reset();
  if (rc != 0) {
    throw SystemError(fmt::format("couldn't run {}: {}", spec.argv.at(0), std::strerror(rc)));
  }
  const auto until = spec.timeout ? Clock::now() + *spec.timeout : Clock::time_point::max();
  CommandResult r;
  bool ended = true;
  try {
    if (spec.capture) ended = drain(out_read, err_read, r, spec, until);
  } catch (...) {
    ::kill(pid, SIGKILL);
    reap(pid, r.status);
    throw;
  }
  if (ended && spec.timeout) {
    ended = reap_until(pid, r.status, until);
  } else if (ended) {
    reap(pid, r.status);
  }
  if (!ended) {
    r.timed_out = true;
    ::kill(pid, SIGKILL);
    reap(pid, r.status);
  }
  return r;
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  }
  return fmt::format("ended with wait status {}", status);
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace dl
