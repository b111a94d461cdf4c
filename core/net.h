// The few socket operations dlrun and spank_dl.so need, each checked once: errors name
// the call, the address and strerror.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/sysio.h"

namespace dl::net {

// The address of this host that the kernel uses to reach `peer` (a numeric IPv4 or
// IPv6 address): a UDP socket is connected to it, which sends nothing.
std::string local_address_towards(const std::string& peer);

// The first non-loopback address of this host's name, or "127.0.0.1".
std::string host_address();

// The interface that holds `address` ("eth0", "lo"); empty when none does.
std::string interface_of(const std::string& address);

// Whether a TCP server could bind `port` on every address now. SO_REUSEADDR as most
// servers (PyTorch's TCPStore included) set it, so a port in TIME_WAIT counts as free.
bool tcp_port_free(std::uint16_t port);

struct Listener {
  sys::Fd fd;
  std::uint16_t port = 0;
};

// A listening TCP socket on `address` with a port the kernel chose: nothing else can
// hold it, so it needs no reservation. Non-blocking: accept_connection never waits for
// a connection that went away between poll and accept.
Listener listen_on_any_port(const std::string& address);

// The first address of a host name (or the address itself), in numeric form.
std::string resolve(const std::string& host);

// Connects within `timeout`; the socket is then blocking, with TCP keepalive so that a
// silently dead peer (a node gone) is noticed within seconds.
sys::Fd connect_tcp(const std::string& address, std::uint16_t port,
                    std::chrono::milliseconds timeout);

// What one TCP connection attempt to `host` (a name or an address) and `port` found (a
// node's slurmd, say), with the reason in `why` unless answered:
//  - answered: the connection was accepted within `timeout`;
//  - refused: the other host's kernel or the network said no (ECONNREFUSED: nothing
//    listens; EHOSTUNREACH, ENETUNREACH, EHOSTDOWN: the host is gone), evidence that
//    nobody on that host can make up;
//  - silent: nothing within `timeout`, or a failure here (the name does not resolve, no
//    local port): no evidence either way, since a full listen queue looks the same.
// Throws dl::SystemError only when this host cannot make a socket.
enum class Reach { answered, refused, silent };
Reach tcp_reach(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout,
                std::string& why);
// tcp_reach(...) == Reach::answered.
bool tcp_answers(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout,
                 std::string& why);

struct Accepted {
  sys::Fd fd;
  std::string peer;  // the numeric address and port it came from
};

// Accepts one connection from a listening socket, with keepalive; std::nullopt when
// none is waiting any more (the peer gave up) or accept fails (logged: a connection
// that failed, a port scan's say, is no reason to stop a server).
std::optional<Accepted> accept_connection(int listener);

void enable_keepalive(int fd);

// Writes all of `data`; throws dl::SystemError when the peer is gone.
void send_all(int fd, std::string_view data);

}  // namespace dl::net
