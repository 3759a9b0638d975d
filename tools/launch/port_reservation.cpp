#include "tools/launch/port_reservation.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "zerotrain/core/error.h"

namespace zerotrain::launch {
namespace {

// Bound to the wildcard address of `family` (IPv6 taking IPv4 too), port 0; -1 with errno set.
int bind_wildcard(int family) {
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int on = 1, off = 0;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  int bound = -1;
  if (family == AF_INET6) {
    // Dual-stack, so that the port is held for IPv4 and IPv6 sockets alike.
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
    sockaddr_in6 any{};
    any.sin6_family = AF_INET6;
    any.sin6_addr = in6addr_any;
    bound = ::bind(fd, reinterpret_cast<sockaddr*>(&any), sizeof(any));
  } else {
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(INADDR_ANY);
    bound = ::bind(fd, reinterpret_cast<sockaddr*>(&any), sizeof(any));
  }
  if (bound != 0) {
    const int saved = errno;
    ::close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

}  // namespace

PortReservation::PortReservation() {
  fd_ = bind_wildcard(AF_INET6);
  if (fd_ < 0) fd_ = bind_wildcard(AF_INET);   // a host without IPv6
  ZT_CHECK(fd_ >= 0, IoError, "cannot find a free TCP port for the rendezvous store: ", std::strerror(errno),
           "; pass --master_port");
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&bound), &length) != 0) {
    const int saved = errno;
    ::close(fd_);
    throw IoError(detail::str("cannot read the port of the rendezvous store's socket: ", std::strerror(saved),
                              "; pass --master_port"));
  }
  port_ = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port)
                                      : ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
}

PortReservation::~PortReservation() { ::close(fd_); }

}  // namespace zerotrain::launch
