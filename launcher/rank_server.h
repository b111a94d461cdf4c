// Rank 0's end of the control connections: lets the step's ranks in (a first line that
// is a HELLO with the step's secret), keeps everyone else out unheard, and carries
// messages to and from the ranks. The protocol: docs/design/control-protocol.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/net.h"
#include "launcher/control.h"

namespace dl {

struct RankServerLimits {
  // Every rank connects right after the fence; this is generous.
  std::chrono::milliseconds connect{60000};
  // A rank sends its HELLO as soon as it connects; a connection that has not within this
  // time is not a rank, or one that cannot work anyway.
  std::chrono::milliseconds hello{10000};
  // At most this many connections wait for their HELLO at once (the oldest is closed).
  std::size_t max_waiting = 64;
  // A HELLO is well below this; a first line that is longer is not one.
  std::size_t max_hello = 512;
};

class RankServer {
 public:
  RankServer(net::Listener listener, std::string secret, std::uint32_t world_size,
             RankServerLimits limits = {});
  ~RankServer();
  RankServer(const RankServer&) = delete;
  RankServer& operator=(const RankServer&) = delete;

  // Waits until ranks 1 to world_size - 1 have each said HELLO, then closes the listener
  // and every other connection. A stranger (another user, a port scan) is closed with a
  // warning and the ranks carry on. Throws dl::SystemError naming the ranks missing after
  // `limits.connect`, a rank that connects twice, or one that hangs up.
  void accept_all();

  // The node each rank named in its HELLO, by rank.
  std::vector<std::pair<std::uint32_t, std::string>> nodes() const;

  // What the ranks send, and a rank's connection lost (its dlrun hung up or broke the
  // protocol; the connection is then closed).
  struct Handlers {
    std::function<void(std::uint32_t rank, const Message& m)> message;
    std::function<void(std::uint32_t rank, const std::string& node, const std::string& why)> lost;
  };
  // Sets the handlers and hands them what the ranks sent during accept_all.
  void start(Handlers handlers);

  // A failed send is logged: the rank's hang-up is seen when its connection is read.
  void send(std::uint32_t rank, const Message& m);
  void broadcast(const Message& m);

  // Adds each open connection to the caller's poll set, with what to do when it is
  // readable.
  void watch(const std::function<void(int fd, std::function<void()> readable)>& add);
  bool any_open() const;

 private:
  struct Connection;
  void accept_one();
  void drop_stranger(Connection& c, const std::string& why);
  void read_hello(Connection& c);
  void on_readable(Connection& c);
  void deliver(Connection& c);
  void lose(Connection& c, const std::string& why);

  std::optional<net::Listener> listener_;
  std::string secret_;
  std::uint32_t world_size_;
  RankServerLimits limits_;
  std::vector<std::unique_ptr<Connection>> connections_;
  std::vector<bool> said_hello_;
  Handlers handlers_;
};

}  // namespace dl
