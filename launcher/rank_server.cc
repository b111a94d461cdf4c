#include "launcher/rank_server.h"

#include <fmt/format.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "core/sysio.h"

namespace dl {

using Steady = std::chrono::steady_clock;

struct RankServer::Connection {
  sys::Fd fd;
  LineBuffer in;
  std::int64_t rank = -1;       // -1 until an authenticated HELLO
  std::string node;             // the rank's node, from its HELLO
  std::string peer;             // the address it connected from
  Steady::time_point hello_by;  // closed unless it has said HELLO by then
};

RankServer::RankServer(net::Listener listener, std::string secret, std::uint32_t world_size,
                       RankServerLimits limits)
    : listener_(std::move(listener)),
      secret_(std::move(secret)),
      world_size_(world_size),
      limits_(limits),
      said_hello_(world_size, false) {
  if (world_size_ > 0) said_hello_[0] = true;
}

RankServer::~RankServer() = default;

void RankServer::accept_all() {
  const auto deadline = Steady::now() + limits_.connect;
  const auto all = [&] {
    return std::all_of(said_hello_.begin(), said_hello_.end(), [](bool b) { return b; });
  };
  const auto forget_closed = [&] {
    connections_.erase(std::remove_if(connections_.begin(), connections_.end(),
                                      [](const auto& c) { return !c->fd; }),
                       connections_.end());
  };
  while (!all()) {
    const auto now = Steady::now();
    if (now >= deadline) {
      std::string missing;
      for (std::uint32_t r = 0; r < said_hello_.size(); ++r) {
        if (!said_hello_[r]) missing += fmt::format("{}{}", missing.empty() ? "" : ",", r);
      }
      throw SystemError(
          fmt::format("rank(s) {} did not connect to rank 0 within {}s", missing,
                      std::chrono::duration_cast<std::chrono::seconds>(limits_.connect).count()));
    }
    auto wake = deadline;
    for (auto& c : connections_) {
      if (!c->fd || c->rank >= 0) continue;
      if (now >= c->hello_by) {
        drop_stranger(*c, "no HELLO in time");
      } else {
        wake = std::min(wake, c->hello_by);
      }
    }
    forget_closed();
    std::vector<pollfd> fds{{listener_->fd.get(), POLLIN, 0}};
    for (const auto& c : connections_) fds.push_back({c->fd.get(), POLLIN, 0});
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count();
    const int n = poll(fds.data(), fds.size(), static_cast<int>(ms) + 1);
    if (n < 0 && errno != EINTR) throw SystemError(fmt::format("poll: {}", std::strerror(errno)));
    if (n <= 0) continue;
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) read_hello(*connections_[i - 1]);
    }
    if (fds[0].revents != 0) accept_one();
  }
  // The ranks are in: nobody else is let in, or heard.
  listener_.reset();
  for (auto& c : connections_) {
    if (c->fd && c->rank < 0) drop_stranger(*c, "not a rank of this step");
  }
  forget_closed();
}

void RankServer::accept_one() {
  std::optional<net::Accepted> a = net::accept_connection(listener_->fd.get());
  if (!a) return;
  // Strangers cannot crowd the ranks out: beyond the limit, the oldest one goes.
  const auto waiting = std::count_if(connections_.begin(), connections_.end(),
                                     [](const auto& c) { return c->fd && c->rank < 0; });
  if (waiting >= static_cast<std::ptrdiff_t>(limits_.max_waiting)) {
    for (auto& c : connections_) {
      if (c->fd && c->rank < 0) {
        drop_stranger(*c, "too many waiting");
        break;
      }
    }
  }
  auto c = std::make_unique<Connection>();
  c->fd = std::move(a->fd);
  c->peer = std::move(a->peer);
  c->hello_by = Steady::now() + limits_.hello;
  connections_.push_back(std::move(c));
}

void RankServer::drop_stranger(Connection& c, const std::string& why) {
  log(LogLevel::warning, "closed a connection to the control port from {}: {}", c.peer, why);
  c.fd.reset();
}

void RankServer::read_hello(Connection& c) {
  std::string data;
  const bool open = sys::read_available(c.fd.get(), data);
  if (c.rank >= 0) {
    // A rank's: only its HELLO is read here; a rank may already have sent more (its
    // program may even have exited), which waits in the buffer for the handlers.
    if (!open) throw SystemError(fmt::format("rank {} hung up before its program started", c.rank));
    c.in.append(data);
    return;
  }
  if (!open) return drop_stranger(c, "hung up before saying which rank it is");
  try {
    c.in.append(data);
  } catch (const SystemError& e) {
    return drop_stranger(c, e.what());
  }
  const auto line = c.in.next_line();
  if (!line) {
    if (c.in.pending() > limits_.max_hello) drop_stranger(c, "a first line too long for a HELLO");
    return;
  }
  const HelloCheck check = check_hello(*line, secret_, world_size_);
  if (!check.hello) return drop_stranger(c, check.why);
  // Only the step's ranks know the secret: a second HELLO for a rank is a bug.
  if (said_hello_[check.hello->rank]) {
    throw SystemError(fmt::format("rank {} connected twice", check.hello->rank));
  }
  said_hello_[check.hello->rank] = true;
  c.rank = check.hello->rank;
  c.node = check.hello->text;
}

std::vector<std::pair<std::uint32_t, std::string>> RankServer::nodes() const {
  std::vector<std::pair<std::uint32_t, std::string>> out;
  for (const auto& c : connections_) {
    if (c->rank >= 0) out.emplace_back(static_cast<std::uint32_t>(c->rank), c->node);
  }
  return out;
}

void RankServer::start(Handlers handlers) {
  handlers_ = std::move(handlers);
  for (auto& c : connections_) deliver(*c);
}

void RankServer::send(std::uint32_t rank, const Message& m) {
  for (auto& c : connections_) {
    if (!c->fd || c->rank != static_cast<std::int64_t>(rank)) continue;
    try {
      net::send_all(c->fd.get(), format_message(m));
    } catch (const SystemError& e) {
      log(LogLevel::verbose, "rank {}: {}", rank, e.what());
    }
  }
}

void RankServer::broadcast(const Message& m) {
  const std::string line = format_message(m);
  for (auto& c : connections_) {
    if (c->rank < 0 || !c->fd) continue;
    try {
      net::send_all(c->fd.get(), line);
    } catch (const SystemError& e) {
      log(LogLevel::verbose, "rank {}: {}", c->rank, e.what());
    }
  }
}

void RankServer::watch(const std::function<void(int fd, std::function<void()> readable)>& add) {
  for (auto& c : connections_) {
    if (!c->fd) continue;
    Connection* conn = c.get();
    add(conn->fd.get(), [this, conn] { on_readable(*conn); });
  }
}

bool RankServer::any_open() const {
  return std::any_of(connections_.begin(), connections_.end(),
                     [](const auto& c) { return c->fd && c->rank >= 0; });
}

void RankServer::on_readable(Connection& c) {
  std::string data;
  if (!sys::read_available(c.fd.get(), data)) return lose(c, "its dlrun hung up");
  try {
    c.in.append(data);
  } catch (const SystemError& e) {
    return lose(c, e.what());
  }
  deliver(c);
}

void RankServer::deliver(Connection& c) {
  try {
    while (auto line = c.in.next_line()) {
      handlers_.message(static_cast<std::uint32_t>(c.rank), parse_message(*line));
    }
  } catch (const SystemError& e) {
    lose(c, e.what());
  }
}

void RankServer::lose(Connection& c, const std::string& why) {
  c.fd.reset();
  if (handlers_.lost) handlers_.lost(static_cast<std::uint32_t>(c.rank), c.node, why);
}

}  // namespace dl
