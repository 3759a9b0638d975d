#include "zerotrain/comm/rendezvous/store_listener.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "zerotrain/core/error.h"

namespace zerotrain::comm::detail {
namespace {

using ::zerotrain::detail::str;

std::string numeric_address(const sockaddr* address, socklen_t length) {
  char host[NI_MAXHOST] = {};
  if (::getnameinfo(address, length, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0) return "?";
  return host;
}

bool is_loopback(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
  }
  if (address->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);
    if (IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr) && v6->sin6_addr.s6_addr[12] == 127;
  }
  return false;
}

// A name, not an address written out (127.0.0.1, ::1) or "localhost": a name that rank 0's
// host maps to loopback is a mistake in a job that spans hosts, while an address or
// "localhost" given on purpose (several launchers on one host, as in tests) is not.
bool names_a_host(const std::string& host) {
  in6_addr scratch{};
  return host != "localhost" && ::inet_pton(AF_INET, host.c_str(), &scratch) != 1 &&
         ::inet_pton(AF_INET6, host.c_str(), &scratch) != 1;
}

// One candidate address: a listening socket, or -1 with errno set.
int bind_and_listen(const addrinfo& candidate) {
  const int fd = ::socket(candidate.ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  // As c10d does for its own listener: a port left in TIME_WAIT by an earlier job that used
  // it can be bound again at once.
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  if (candidate.ai_family == AF_INET6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
  if (::bind(fd, candidate.ai_addr, candidate.ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
    const int saved = errno;
    ::close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

}  // namespace

StoreListener listen_for_store(const std::string& host, int port, bool spans_hosts) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int resolved = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (resolved != 0 || found == nullptr) {
    throw CommError(str("rank 0 cannot resolve MASTER_ADDR '", host, "' (", ::gai_strerror(resolved),
                        ") to listen for the rendezvous store there; give an IP address of rank 0's host, or a "
                        "hostname every host resolves"),
                    "rendezvous");
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, &::freeaddrinfo);

  std::string tried;
  int last_errno = 0;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const std::string address = numeric_address(a->ai_addr, a->ai_addrlen);
    if (spans_hosts && is_loopback(a->ai_addr) && names_a_host(host)) {
      throw CommError(str("MASTER_ADDR '", host, "' is ", address, " on rank 0's host, a loopback address that the "
                          "ranks on other hosts cannot reach; give an address of rank 0's host on the network they "
                          "share (a hostname that /etc/hosts maps to 127.0.1.1 does this)"),
                      "rendezvous");
    }
    const int fd = bind_and_listen(*a);
    if (fd >= 0) {
      sockaddr_storage bound{};
      socklen_t length = sizeof(bound);
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
      const int bound_port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                                          : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
      return {fd, bound_port, address};
    }
    last_errno = errno;
    tried += (tried.empty() ? "" : ", ") + address;
  }
  const char* hint = last_errno == EADDRNOTAVAIL
                         ? "that is not an address of this host: MASTER_ADDR must be the address of the host of rank 0"
                     : last_errno == EADDRINUSE
                         ? "the port is in use, by an earlier job or another program: give each job its own "
                           "MASTER_PORT (--master_port), or wait for the earlier job to end"
                         : "check MASTER_ADDR and MASTER_PORT";
  throw CommError(str("rank 0 cannot listen for the rendezvous store on MASTER_ADDR '", host, "' (", tried,
                      ") port ", port, ": ", std::strerror(last_errno), "; ", hint),
                  "rendezvous");
}

}  // namespace zerotrain::comm::detail
