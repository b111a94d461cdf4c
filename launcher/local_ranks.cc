#include "launcher/local_ranks.h"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/net.h"
#include "core/process.h"
#include "core/signals.h"
#include "launcher/launch.h"
#include "launcher/local_launch.h"
#include "launcher/program.h"

namespace dl {
namespace {

// The ranks are all on this node: they meet on loopback, which needs no interface
// choice and is not reachable from other hosts.
constexpr const char* kLocalMasterAddr = "127.0.0.1";
// An encoded rendezvous is well below this.
constexpr std::size_t kMaxRendezvous = 64 * 1024;

// A connected pair of sockets: rank 0 sends the rendezvous on `to_rank`, the rank reads
// it on `from_rank0` up to end of file (MSG_NOSIGNAL: a rank that is gone is no SIGPIPE).
struct Channel {
  sys::Fd to_rank;
  sys::Fd from_rank0;
};

Channel make_channel() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    throw SystemError(fmt::format("couldn't create a socket pair: {}", std::strerror(errno)));
  }
  return {sys::Fd(fds[0]), sys::Fd(fds[1])};
}

std::string read_to_end(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n == 0) return out;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SystemError(
          fmt::format("couldn't read the rendezvous from rank 0: {}", std::strerror(errno)));
    }
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > kMaxRendezvous) throw SystemError("the rendezvous from rank 0 is too long");
  }
}

// In rank `rank`'s process, just forked: what the PMIx bootstrap gives a task.
Bootstrap rank_bootstrap(std::uint32_t rank, std::uint32_t ranks, const std::string& node,
                         const ResumeRequest& resume, std::vector<Channel>& channels) {
  Bootstrap b;
  b.layout = local_layout(rank, ranks);
  if (rank == 0) {
    for (auto& c : channels) c.from_rank0.reset();
    choose_local_rendezvous(b, node, resume, kLocalMasterAddr);
    const std::string text = encode_rendezvous(b.rendezvous);
    for (std::uint32_t r = 1; r < ranks; ++r) {
      try {
        net::send_all(channels[r].to_rank.get(), text);
      } catch (const SystemError& e) {
        // That rank is gone; the coordinator notices it is missing and says so.
        log(LogLevel::verbose, "rank {}: {}", r, e.what());
      }
    }
  } else {
    // Every other copy of the sending end must be closed for the end of file.
    for (auto& c : channels) c.to_rank.reset();
    const std::string text = read_to_end(channels[rank].from_rank0.get());
    if (text.empty()) throw SystemError("rank 0 ended before it chose the rendezvous");
    b.rendezvous = decode_rendezvous(text);
  }
  channels.clear();
  if (!b.rendezvous.error.empty()) {
    throw SystemError(rank == 0 ? b.rendezvous.error
                                : "rank 0 could not start: " + b.rendezvous.error);
  }
  return b;
}

struct Rank {
  pid_t pid = -1;
  std::optional<int> status;
};

void kill_started(std::vector<Rank>& started) {
  for (auto& r : started) kill(r.pid, SIGKILL);
  for (auto& r : started) {
    int status = 0;
    while (waitpid(r.pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

// The launcher: passes on every signal but SIGCHLD and reaps the ranks until none is left.
int wait_for_ranks(std::vector<Rank>& ranks, const sys::Fd& signals) {
  std::size_t left = ranks.size();
  std::string signalled;
  while (left > 0) {
    pollfd p{signals.get(), POLLIN, 0};
    const int n = poll(&p, 1, 1000);
    if (n < 0 && errno != EINTR) throw SystemError(fmt::format("poll: {}", std::strerror(errno)));
    signalfd_siginfo si{};
    while (n > 0 && read(signals.get(), &si, sizeof si) == sizeof si) {
      const int sig = static_cast<int>(si.ssi_signo);
      if (sig == SIGCHLD) continue;
      // From a terminal every rank has it already; a second copy asks for nothing new.
      log(LogLevel::verbose, "got {}: passing it on to the ranks", signal_name(sig));
      if (signalled.empty()) signalled = signal_name(sig);
      for (const auto& r : ranks) {
        if (!r.status) kill(r.pid, sig);
      }
    }
    // Polled as well: SIGCHLDs coalesce.
    for (auto& r : ranks) {
      if (r.status) continue;
      int status = 0;
      const pid_t got = waitpid(r.pid, &status, WNOHANG);
      if (got == r.pid) {
        r.status = status;
        --left;
      }
    }
  }
  std::vector<int> codes;
  std::string how;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    codes.push_back(exit_code_of(*ranks[i].status));
    how +=
        fmt::format("{}rank {} {}", i == 0 ? "" : ", ", i, describe_wait_status(*ranks[i].status));
  }
  const int code = local_exit_code(codes);
  const std::string who = ranks.size() == 1 ? std::string("the local rank has")
                                            : fmt::format("the {} local ranks have", ranks.size());
  log(code == 0 && signalled.empty() ? LogLevel::verbose : LogLevel::info,
      "{}{} ended ({}): exit code {}", signalled.empty() ? "" : signalled + ": ", who, how, code);
  return code;
}

}  // namespace

LocalStart start_local_ranks(std::uint32_t ranks, const std::string& node,
                             const ResumeRequest& resume, Inherited& inherited,
                             const sys::Fd& signals,
                             const std::function<void(std::uint32_t rank)>& in_rank) {
  std::vector<Channel> channels;
  for (std::uint32_t r = 0; r < ranks; ++r) channels.push_back(make_channel());
  const pid_t launcher = getpid();
  std::vector<Rank> started;
  for (std::uint32_t r = 0; r < ranks; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      const int err = errno;
      channels.clear();
      kill_started(started);
      throw SystemError(
          fmt::format("couldn't start local rank {}: fork: {}", r, std::strerror(err)));
    }
    if (pid == 0) {
      // A launcher that dies (even by SIGKILL) stops its ranks, which stop their programs.
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != launcher) raise(SIGTERM);
      in_rank(r);
      LocalStart start;
      start.bootstrap = rank_bootstrap(r, ranks, node, resume, channels);
      // Only several ranks' output is read through pipes (for the prefix).
      const bool on_terminal = ranks > 1 && (isatty(STDOUT_FILENO) || isatty(STDERR_FILENO));
      inherited.env = apply_env(inherited.env, local_rank_env(inherited.env, on_terminal));
      return start;
    }
    started.push_back(Rank{pid, std::nullopt});
  }
  channels.clear();
  LocalStart start;
  start.exit_code = wait_for_ranks(started, signals);
  return start;
}

}  // namespace dl
