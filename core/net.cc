#include "core/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "core/log.h"

namespace dl::net {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw SystemError(fmt::format("couldn't {}: {}", what, std::strerror(errno)));
}

struct AddrInfoDeleter {
  void operator()(addrinfo* a) const noexcept { freeaddrinfo(a); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

AddrInfoPtr numeric_address(const std::string& address, std::uint16_t port, int socktype) {
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  hints.ai_socktype = socktype;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(address.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) {
    throw SystemError(fmt::format("'{}' is not a numeric address: {}", address, gai_strerror(rc)));
  }
  return AddrInfoPtr(res);
}

std::string numeric_host(const sockaddr* sa, socklen_t len) {
  char host[NI_MAXHOST];
  const int rc = getnameinfo(sa, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST);
  if (rc != 0) throw SystemError(fmt::format("couldn't print an address: {}", gai_strerror(rc)));
  return host;
}

std::uint16_t port_of(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) fail("read a socket's port");
  return ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

}  // namespace

std::string local_address_towards(const std::string& peer) {
  const AddrInfoPtr ai = numeric_address(peer, 9, SOCK_DGRAM);
  sys::Fd fd(socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) fail("create a UDP socket");
  if (connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
    fail(fmt::format("find a route to {}", peer));
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    fail(fmt::format("read the local address towards {}", peer));
  }
  return numeric_host(reinterpret_cast<sockaddr*>(&ss), len);
}

std::string host_address() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) fail("read the host name");
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(name, nullptr, &hints, &res) != 0) return "127.0.0.1";
  const AddrInfoPtr owner(res);
  for (const addrinfo* a = res; a; a = a->ai_next) {
    const std::string host = numeric_host(a->ai_addr, a->ai_addrlen);
    if (host.rfind("127.", 0) != 0 && host != "::1") return host;
  }
  return "127.0.0.1";
}

std::string interface_of(const std::string& address) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) fail("list the network interfaces");
  std::string found;
  for (const ifaddrs* i = list; i && found.empty(); i = i->ifa_next) {
    if (!i->ifa_addr) continue;
    const int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    const socklen_t len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    char host[NI_MAXHOST];
    if (getnameinfo(i->ifa_addr, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) == 0 &&
        address == host) {
      found = i->ifa_name;
    }
  }
  freeifaddrs(list);
  return found;
}

bool tcp_port_free(std::uint16_t port) {
  sys::Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) fail("create a TCP socket");
  const int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  sa.sin_port = htons(port);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) return true;
  if (errno == EADDRINUSE || errno == EACCES) return false;
  fail(fmt::format("test whether TCP port {} is free", port));
}

Listener listen_on_any_port(const std::string& address) {
  const AddrInfoPtr ai = numeric_address(address, 0, SOCK_STREAM);
  Listener l;
  l.fd.reset(socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!l.fd) fail("create a TCP socket");
  if (bind(l.fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) fail(fmt::format("bind to {}", address));
  if (listen(l.fd.get(), 1024) != 0) fail(fmt::format("listen on {}", address));
  l.port = port_of(l.fd.get());
  return l;
}

void enable_keepalive(int fd) {
  // Dead after 5 s of silence plus 3 unanswered probes 2 s apart: about 11 s.
  const int on = 1;
  const int idle = 5;
  const int interval = 2;
  const int count = 3;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

std::string resolve(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0) throw SystemError(fmt::format("couldn't resolve '{}': {}", host, gai_strerror(rc)));
  const AddrInfoPtr ai(res);
  return numeric_host(ai->ai_addr, ai->ai_addrlen);
}

sys::Fd connect_tcp(const std::string& address, std::uint16_t port,
                    std::chrono::milliseconds timeout) {
  const AddrInfoPtr ai = numeric_address(address, port, SOCK_STREAM);
  sys::Fd fd(socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) fail("create a TCP socket");
  const std::string where = fmt::format("{}:{}", address, port);
  if (connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) fail(fmt::format("connect to {}", where));
    pollfd p{fd.get(), POLLOUT, 0};
    int rc;
    do {
      rc = poll(&p, 1, static_cast<int>(timeout.count()));
    } while (rc < 0 && errno == EINTR);
    if (rc == 0) {
      throw SystemError(
          fmt::format("couldn't connect to {}: no answer in {} ms", where, timeout.count()));
    }
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (rc < 0 || err != 0) {
      errno = err ? err : errno;
      fail(fmt::format("connect to {}", where));
    }
  }
  const int flags = fcntl(fd.get(), F_GETFL);
  fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  enable_keepalive(fd.get());
  return fd;
}

namespace {
// One connection attempt to one address, bounded by `timeout`.
Reach connects(const addrinfo& ai, std::chrono::milliseconds timeout, std::string& why) {
  sys::Fd fd(socket(ai.ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) fail("create a TCP socket");
  int err = 0;
  if (connect(fd.get(), ai.ai_addr, ai.ai_addrlen) == 0) return Reach::answered;
  if (errno != EINPROGRESS) {
    err = errno;
  } else {
    pollfd p{fd.get(), POLLOUT, 0};
    int rc = 0;
    while ((rc = poll(&p, 1, static_cast<int>(timeout.count()))) < 0 && errno == EINTR) {
    }
    if (rc == 0) {
      why = fmt::format("no answer in {} ms", timeout.count());
      return Reach::silent;
    }
    socklen_t len = sizeof err;
    if (rc < 0 || getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err == 0) return Reach::answered;
  }
  why = std::strerror(err);
  const bool refused =
      err == ECONNREFUSED || err == EHOSTUNREACH || err == ENETUNREACH || err == EHOSTDOWN;
  return refused ? Reach::refused : Reach::silent;
}
}  // namespace

Reach tcp_reach(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout,
                std::string& why) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    why = fmt::format("{}: {}", host, gai_strerror(rc));
    return Reach::silent;
  }
  const AddrInfoPtr ai(found);
  // Every address of the name, as a client does: "localhost" is ::1 first on Debian 13,
  // and a slurmd may listen on IPv4 only. Refused only when every address refuses.
  Reach reach = Reach::refused;
  for (const addrinfo* a = ai.get(); a; a = a->ai_next) {
    const Reach r = connects(*a, timeout, why);
    if (r == Reach::answered) return r;
    if (r == Reach::silent) reach = r;
  }
  return reach;
}

bool tcp_answers(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout,
                 std::string& why) {
  return tcp_reach(host, port, timeout, why) == Reach::answered;
}

std::optional<Accepted> accept_connection(int listener) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  Accepted a;
  for (;;) {
    len = sizeof ss;
    a.fd.reset(accept4(listener, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC));
    if (a.fd) break;
    if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return std::nullopt;
    log(LogLevel::verbose, "couldn't accept a connection: {}", std::strerror(errno));
    return std::nullopt;
  }
  enable_keepalive(a.fd.get());
  char port[NI_MAXSERV];
  char host[NI_MAXHOST];
  a.peer = getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, port, sizeof port,
                       NI_NUMERICHOST | NI_NUMERICSERV) == 0
               ? fmt::format("{}:{}", host, port)
               : "an unknown address";
  return a;
}

void send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("send to a rank");
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace dl::net
