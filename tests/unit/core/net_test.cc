#include "core/net.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

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
  EXPECT_EQ(tcp_reach("127.0.0.1", port, 1s, why), Reach::refused);
  why.clear();
  EXPECT_FALSE(tcp_answers("no-such-host.invalid", port, 1s, why));
  EXPECT_EQ(why.rfind("no-such-host.invalid: ", 0), 0u) << why;
  // A name that does not resolve here is no evidence about the host.
  EXPECT_EQ(tcp_reach("no-such-host.invalid", port, 1s, why), Reach::silent);
}

TEST(TcpAnswers, AFullListenQueueIsSilentNotRefused) {
  // A listener that never accepts, with a queue of one: connections beyond it get no
  // answer (the SYN is dropped), which is what idle connections do to a busy slurmd.
  const Listener l = listen_on_any_port("127.0.0.1");
  ASSERT_EQ(::listen(l.fd.get(), 0), 0);
  std::string why;
  Reach reach = Reach::answered;
  // Each answered connection stays queued (closed by us, never accepted).
  for (int i = 0; i < 8 && reach == Reach::answered; ++i) {
    reach = tcp_reach("127.0.0.1", l.port, 300ms, why);
  }
  EXPECT_EQ(reach, Reach::silent) << why;
  EXPECT_EQ(why, "no answer in 300 ms");
}

}  // namespace
}  // namespace dl::net
