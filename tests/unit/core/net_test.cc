#include "core/net.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace dl::net {
namespace {

using namespace std::chrono_literals;

TEST(TcpAnswers, AListeningPortAnswers) {
  const Listener l = listen_on_any_port("127.0.0.1");
  std::string why;
  EXPECT_TRUE(tcp_answers("127.0.0.1", l.port, 1s, why)) << why;
  EXPECT_TRUE(tcp_answers("localhost", l.port, 1s, why)) << why;  // a name, as sinfo gives
}

TEST(TcpAnswers, AClosedPortOrAnUnknownNameDoesNotAndSaysWhy) {
  std::uint16_t port = 0;
  {
    const Listener l = listen_on_any_port("127.0.0.1");
    port = l.port;
  }  // closed: nothing listens there now
  std::string why;
  EXPECT_FALSE(tcp_answers("127.0.0.1", port, 1s, why));
  EXPECT_EQ(why, "Connection refused");
  why.clear();
  EXPECT_FALSE(tcp_answers("no-such-host.invalid", port, 1s, why));
  EXPECT_EQ(why.rfind("no-such-host.invalid: ", 0), 0u) << why;
}

}  // namespace
}  // namespace dl::net
