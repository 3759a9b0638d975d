// The rendezvous store (c10d's TCPStore, served by rank 0) and the progress board kept in
// it. Shared by the Gloo and MPI backends. Internal to comm/.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <memory>
#include <string>

#include "zerotrain/comm/progress.h"
#include "zerotrain/comm/rendezvous/rendezvous.h"
#include "zerotrain/comm/types.h"

namespace zerotrain::comm::detail {

struct StoreAddress {
  std::string host;
  int port = 0;   // 0 on the server: pick a free port (read it back with store_port)
  bool spans_hosts = false;   // ranks on other hosts connect: a loopback `host` is refused
};

// MASTER_ADDR:MASTER_PORT of the launcher's environment; it spans hosts when the launcher
// says this host holds only some of the ranks.
StoreAddress master_store_address(const RendezvousInfo& where);

// Rank 0 serves, on `host`'s address only (store_listener.h), the others connect; every rank
// waits up to `timeout` for the others, and checks that the store is its job's (job_token.h)
// before it writes anything there. Throws CommError saying which address could not be
// reached and what to check.
c10::intrusive_ptr<c10d::Store> connect_store(const StoreAddress& address, int rank, int world_size,
                                              std::chrono::milliseconds timeout);
int store_port(const c10::intrusive_ptr<c10d::Store>& store);

// A barrier in the store with a deadline: every rank checks in under zt/arrived/<rank>, and
// a rank missing at the deadline is named in the TimeoutError. `what` says what is starting.
void wait_for_ranks(c10d::Store& store, int rank, int world_size, std::chrono::milliseconds timeout,
                    const std::string& what);

// A board whose entries live in the store under zt/progress/<rank>. publish() only records
// the value; a background thread writes it to the store every 100 ms when it changed, so
// collectives never wait on the store.
std::unique_ptr<ProgressBoard> make_store_board(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size);

// The address of this host's interface that routes to `peer` (a hostname or IP), so that
// the backend listens where the other hosts can reach it. "127.0.0.1" for a local peer.
std::string local_address_towards(const std::string& peer);

}  // namespace zerotrain::comm::detail
