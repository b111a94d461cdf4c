// Rank 0's control server on loopback sockets: who gets in, who is closed and when, and
// what reaches the handlers.
#include "launcher/rank_server.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/sysio.h"

namespace dl {
namespace {

using namespace std::chrono_literals;

constexpr char kSecret[] = "00112233445566778899aabbccddeeff";

struct Server {
  net::Listener listener = net::listen_on_any_port("127.0.0.1");
  std::uint16_t port = listener.port;
};

sys::Fd connect_to(std::uint16_t port) { return net::connect_tcp("127.0.0.1", port, 2s); }

std::string hello_line(std::uint32_t rank, const std::string& node,
                       const std::string& key = kSecret) {
  Message m;
  m.kind = MsgKind::hello;
  m.rank = rank;
  m.key = key;
  m.text = node;
  return format_message(m);
}

sys::Fd rank_says_hello(std::uint16_t port, std::uint32_t rank, const std::string& node) {
  sys::Fd fd = connect_to(port);
  net::send_all(fd.get(), hello_line(rank, node));
  return fd;
}

// Whether the server closed `fd` (end of file within `wait`).
bool closed_by_server(const sys::Fd& fd, std::chrono::milliseconds wait = 0ms) {
  pollfd p{fd.get(), POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(wait.count())) <= 0) return false;
  char c;
  return read(fd.get(), &c, 1) == 0;
}

// Lines the server sent to `fd` within `wait`.
std::string received(const sys::Fd& fd, std::chrono::milliseconds wait = 1000ms) {
  pollfd p{fd.get(), POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(wait.count())) <= 0) return "";
  std::string data;
  sys::read_available(fd.get(), data);
  return data;
}

// One round of the caller's poll loop over the server's connections.
void pump(RankServer& server, std::chrono::milliseconds wait = 1000ms) {
  std::vector<pollfd> fds;
  std::vector<std::function<void()>> handlers;
  server.watch([&](int fd, std::function<void()> readable) {
    fds.push_back({fd, POLLIN, 0});
    handlers.push_back(std::move(readable));
  });
  if (poll(fds.data(), fds.size(), static_cast<int>(wait.count())) <= 0) return;
  for (std::size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents != 0) handlers[i]();
  }
}

// accept_all's error ("" when it returns).
std::string why_accept_fails(RankServer& server) {
  try {
    server.accept_all();
  } catch (const SystemError& e) {
    return e.what();
  }
  return "";
}

struct Seen {
  std::vector<std::pair<std::uint32_t, Message>> messages;
  std::vector<std::string> lost;  // "rank node: why"
  RankServer::Handlers handlers() {
    RankServer::Handlers h;
    h.message = [this](std::uint32_t rank, const Message& m) { messages.emplace_back(rank, m); };
    h.lost = [this](std::uint32_t rank, const std::string& node, const std::string& why) {
      lost.push_back(std::to_string(rank) + " " + node + ": " + why);
    };
    return h;
  }
};

TEST(RankServer, LetsTheRanksInAndClosesStrangers) {
  Server s;
  const sys::Fd wrong_key = connect_to(s.port);
  net::send_all(wrong_key.get(), hello_line(1, "n9", std::string(32, '0')));
  const sys::Fd not_control = connect_to(s.port);
  net::send_all(not_control.get(), "GET / HTTP/1.0\n");
  const sys::Fd no_such_rank = connect_to(s.port);
  net::send_all(no_such_rank.get(), hello_line(7, "n7"));
  const sys::Fd silent = connect_to(s.port);
  const sys::Fd r2 = rank_says_hello(s.port, 2, "n2");
  const sys::Fd r1 = rank_says_hello(s.port, 1, "n1");

  RankServer server(std::move(s.listener), kSecret, 3);
  server.accept_all();

  auto nodes = server.nodes();
  std::sort(nodes.begin(), nodes.end());
  EXPECT_EQ(nodes, (std::vector<std::pair<std::uint32_t, std::string>>{{1, "n1"}, {2, "n2"}}));
  for (const sys::Fd* fd : {&wrong_key, &not_control, &no_such_rank, &silent}) {
    EXPECT_TRUE(closed_by_server(*fd, 1000ms));
  }
  EXPECT_FALSE(closed_by_server(r1));
  EXPECT_FALSE(closed_by_server(r2));
  EXPECT_THROW(connect_to(s.port), SystemError);  // nobody else gets in
}

// A stranger is closed while the ranks are still awaited, not only once they are in.
TEST(RankServer, ClosesAStrangerWithoutHelloInTime) {
  Server s;
  const sys::Fd silent = connect_to(s.port);
  const std::uint16_t port = s.port;
  bool closed_before_ranks = false;
  sys::Fd r1;
  std::thread ranks([&] {
    std::this_thread::sleep_for(400ms);
    closed_before_ranks = closed_by_server(silent);
    r1 = rank_says_hello(port, 1, "n1");
  });
  RankServerLimits limits;
  limits.hello = 100ms;
  RankServer server(std::move(s.listener), kSecret, 2, limits);
  server.accept_all();
  ranks.join();
  EXPECT_TRUE(closed_before_ranks);
}

TEST(RankServer, ClosesAFirstLineTooLongForAHello) {
  Server s;
  const sys::Fd talker = connect_to(s.port);
  net::send_all(talker.get(), std::string(600, 'x'));
  const std::uint16_t port = s.port;
  bool closed_before_ranks = false;
  sys::Fd r1;
  std::thread ranks([&] {
    std::this_thread::sleep_for(300ms);
    closed_before_ranks = closed_by_server(talker);
    r1 = rank_says_hello(port, 1, "n1");
  });
  RankServer server(std::move(s.listener), kSecret, 2);
  server.accept_all();
  ranks.join();
  EXPECT_TRUE(closed_before_ranks);
}

TEST(RankServer, ClosesTheOldestStrangerBeyondTheLimit) {
  Server s;
  const sys::Fd first = connect_to(s.port);
  const sys::Fd second = connect_to(s.port);
  const sys::Fd third = connect_to(s.port);
  const std::uint16_t port = s.port;
  bool first_closed = false, second_closed = true;
  sys::Fd r1;
  std::thread ranks([&] {
    std::this_thread::sleep_for(300ms);
    first_closed = closed_by_server(first);
    second_closed = closed_by_server(second);
    r1 = rank_says_hello(port, 1, "n1");
  });
  RankServerLimits limits;
  limits.max_waiting = 2;
  RankServer server(std::move(s.listener), kSecret, 2, limits);
  server.accept_all();
  ranks.join();
  EXPECT_TRUE(first_closed);
  EXPECT_FALSE(second_closed);
}

TEST(RankServer, NamesTheRanksThatDidNotConnect) {
  Server s;
  const sys::Fd r1 = rank_says_hello(s.port, 1, "n1");
  RankServerLimits limits;
  limits.connect = 200ms;
  RankServer server(std::move(s.listener), kSecret, 4, limits);
  EXPECT_EQ(why_accept_fails(server), "rank(s) 2,3 did not connect to rank 0 within 0s");
}

TEST(RankServer, RefusesARankThatConnectsTwice) {
  Server s;
  const sys::Fd a = rank_says_hello(s.port, 1, "n1");
  const sys::Fd b = rank_says_hello(s.port, 1, "n1");
  RankServerLimits limits;
  limits.connect = 2s;
  RankServer server(std::move(s.listener), kSecret, 3, limits);
  EXPECT_EQ(why_accept_fails(server), "rank 1 connected twice");
}

TEST(RankServer, RefusesARankThatHangsUpBeforeItsProgramStarts) {
  Server s;
  sys::Fd gone = rank_says_hello(s.port, 1, "n1");
  const std::uint16_t port = s.port;
  sys::Fd r2;
  std::thread ranks([&] {
    std::this_thread::sleep_for(200ms);
    gone.reset();
    std::this_thread::sleep_for(200ms);
    r2 = rank_says_hello(port, 2, "n2");
  });
  RankServer server(std::move(s.listener), kSecret, 3);
  EXPECT_EQ(why_accept_fails(server), "rank 1 hung up before its program started");
  ranks.join();
}

TEST(RankServer, HandsOnMessagesSentBeforeItStarted) {
  Server s;
  Message exit;
  exit.kind = MsgKind::exit;
  exit.code = 3;
  exit.text = "exited with status 3";
  const sys::Fd r1 = connect_to(s.port);
  net::send_all(r1.get(), hello_line(1, "n1") + format_message(exit));  // read with the HELLO
  RankServer server(std::move(s.listener), kSecret, 2);
  server.accept_all();
  Seen seen;
  server.start(seen.handlers());
  ASSERT_EQ(seen.messages.size(), 1u);
  EXPECT_EQ(seen.messages[0].first, 1u);
  EXPECT_EQ(seen.messages[0].second.kind, MsgKind::exit);
  EXPECT_EQ(seen.messages[0].second.code, 3);
}

TEST(RankServer, SendsToOneRankOrAll) {
  Server s;
  const sys::Fd r1 = rank_says_hello(s.port, 1, "n1");
  const sys::Fd r2 = rank_says_hello(s.port, 2, "n2");
  RankServer server(std::move(s.listener), kSecret, 3);
  server.accept_all();
  Seen seen;
  server.start(seen.handlers());
  Message prepare;
  prepare.kind = MsgKind::prepare;
  prepare.seq = 5;
  server.send(2, prepare);
  EXPECT_EQ(received(r2), format_message(prepare));
  EXPECT_EQ(received(r1, 100ms), "");
  Message end;
  end.kind = MsgKind::end;
  end.text = "done";
  server.broadcast(end);
  EXPECT_EQ(received(r1), format_message(end));
  EXPECT_EQ(received(r2), format_message(end));
}

TEST(RankServer, LosesARankThatHangsUpOrBreaksTheProtocol) {
  Server s;
  sys::Fd r1 = rank_says_hello(s.port, 1, "n1");
  const sys::Fd r2 = rank_says_hello(s.port, 2, "n2");
  RankServer server(std::move(s.listener), kSecret, 3);
  server.accept_all();
  Seen seen;
  server.start(seen.handlers());
  r1.reset();
  pump(server);
  ASSERT_EQ(seen.lost, std::vector<std::string>{"1 n1: its dlrun hung up"});
  EXPECT_TRUE(server.any_open());
  net::send_all(r2.get(), "NONSENSE\n");
  pump(server);
  ASSERT_EQ(seen.lost.size(), 2u);
  EXPECT_EQ(seen.lost[1].rfind("2 n2: ", 0), 0u) << seen.lost[1];
  EXPECT_TRUE(closed_by_server(r2, 1000ms));
  EXPECT_FALSE(server.any_open());
  EXPECT_TRUE(seen.messages.empty());
}

}  // namespace
}  // namespace dl
