// The launcher's hold on the rendezvous port: no other socket of the host is given it, while
// rank 0 (binding with SO_REUSEADDR, as zerotrain's store and c10d's TCPStore do) can still
// listen there.
#include "tools/launch/port_reservation.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace zl = zerotrain::launch;

namespace {

sockaddr_in loopback(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  return address;
}

// A socket bound to 127.0.0.1:port (with SO_REUSEADDR when `reuse`), or -1 with errno set.
int bind_loopback(int port, bool reuse) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int on = 1;
  if (reuse) ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  const sockaddr_in address = loopback(port);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    const int saved = errno;
    ::close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

int local_port(int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  return ntohs(address.sin_port);
}

// In a network namespace of its own whose ephemeral range is ten ports: a reservation, then
// outgoing connections until the range runs out. "" when none of them was given the held port.
std::string connections_avoid_the_held_port() {
  const int ioctl_fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  ifreq lo{};
  std::strncpy(lo.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(ioctl_fd, SIOCGIFFLAGS, &lo) != 0) return "SIOCGIFFLAGS failed";
  lo.ifr_flags |= IFF_UP;
  if (::ioctl(ioctl_fd, SIOCSIFFLAGS, &lo) != 0) return "cannot bring lo up";
  std::ofstream("/proc/sys/net/ipv4/ip_local_port_range") << "40000 40009\n";
  zl::PortReservation held;
  if (held.port() < 40000 || held.port() > 40009) return "the held port is outside the narrowed range";
  const int server = bind_loopback(50000, true);
  if (server < 0 || ::listen(server, 64) != 0) return "cannot listen on 127.0.0.1:50000";
  const sockaddr_in target = loopback(50000);
  int connected = 0;
  for (int i = 0; i < 10; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&target), sizeof(target)) != 0) {
      if (errno != EADDRNOTAVAIL) return std::string("connect: ") + std::strerror(errno);
      break;
    }
    if (local_port(fd) == held.port()) return "an outgoing connection was given the held port";
    ++connected;
  }
  if (connected != 9) return "the other nine ports of the range were not all given out";
  return "";
}

}  // namespace

TEST(PortReservation, RankZeroCanListenOnTheHeldPortAndOtherProgramsCannotBindIt) {
  zl::PortReservation held;
  ASSERT_GT(held.port(), 0);
  // A program binding as most do (no SO_REUSEADDR) is refused: the port is taken.
  EXPECT_EQ(bind_loopback(held.port(), false), -1);
  EXPECT_EQ(errno, EADDRINUSE);
  // Rank 0's store binds with SO_REUSEADDR and listens; a rank connects.
  const int store = bind_loopback(held.port(), true);
  ASSERT_GE(store, 0) << std::strerror(errno);
  ASSERT_EQ(::listen(store, 8), 0) << std::strerror(errno);
  const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_in target = loopback(held.port());
  EXPECT_EQ(::connect(client, reinterpret_cast<const sockaddr*>(&target), sizeof(target)), 0) << std::strerror(errno);
  // A second store on the same port (another job) is refused while the first listens.
  EXPECT_EQ(bind_loopback(held.port(), true), -1);
  ::close(client);
  ::close(store);
}

TEST(PortReservation, ThePortIsFreeAgainOnceReleased) {
  int port = 0;
  {
    zl::PortReservation held;
    port = held.port();
  }
  const int fd = bind_loopback(port, false);
  EXPECT_GE(fd, 0) << std::strerror(errno);
  ::close(fd);
}

TEST(PortReservation, OutgoingConnectionsAreNeverGivenTheHeldPort) {
  // The race it closes: a connection from anywhere on the host taking the port from the
  // ephemeral range before rank 0 listens. Shown where the range is small enough to run out.
  int result[2];
  ASSERT_EQ(::pipe(result), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(result[0]);
    std::string outcome = ::unshare(CLONE_NEWNET) != 0 ? "skip" : connections_avoid_the_held_port();
    if (outcome.empty()) outcome = "ok";
    (void)!::write(result[1], outcome.data(), outcome.size());
    ::_exit(0);
  }
  ::close(result[1]);
  std::string outcome;
  char buffer[256];
  for (ssize_t n; (n = ::read(result[0], buffer, sizeof(buffer))) > 0;) outcome.append(buffer, static_cast<size_t>(n));
  ::close(result[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (outcome == "skip") GTEST_SKIP() << "no network namespace of its own here (unshare needs CAP_SYS_ADMIN)";
  EXPECT_EQ(outcome, "ok");
}
