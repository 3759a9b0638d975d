// The listening socket of the rendezvous store's server, bound to MASTER_ADDR's address only.
// c10d's TCPStore, left to itself, listens on every interface of rank 0's host (IPv4 and
// IPv6) whatever MASTER_ADDR says; it takes over a socket bound here instead
// (TCPStoreOptions::masterListenFd), so a single-node job (MASTER_ADDR=127.0.0.1) is
// reachable from this host only. Internal to comm/.
#pragma once

#include <string>

namespace zerotrain::comm::detail {

struct StoreListener {
  int fd = -1;            // listening; the store's server owns it once handed over
  int port = 0;           // the bound port (the one asked for, or the free one picked for 0)
  std::string address;    // the numeric address bound, for messages
};

// Binds and listens on the first address `host` resolves to (IPv4 or IPv6) that is an address
// of this host, port `port` (0: a free one). `spans_hosts`: ranks on other hosts must reach
// it, so a hostname that resolves to loopback here (one that /etc/hosts maps to 127.0.1.1,
// say) is refused rather than left for them to time out on. Throws CommError naming the
// address and what to set.
StoreListener listen_for_store(const std::string& host, int port, bool spans_hosts);

}  // namespace zerotrain::comm::detail
