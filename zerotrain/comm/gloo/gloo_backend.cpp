// Gloo (CPU, TCP) through c10d's ProcessGroupGloo from the LibTorch wheel. The wheel ships
// no Gloo headers; Debian's libgloo-dev provides them (docs/notes/comm-backends.md says
// why that is safe: we only hold Gloo objects through pointers).
#define USE_C10D_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <signal.h>

#include <algorithm>

#include "zerotrain/comm/c10d/c10d_backend.h"
#include "zerotrain/comm/gloo/gloo_backend.h"
#include "zerotrain/comm/rendezvous/store.h"
#include "zerotrain/core/env.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"

namespace zerotrain::comm::detail {
namespace {

// The device Gloo listens on: GLOO_SOCKET_IFNAME's interface, or the address that routes
// towards MASTER_ADDR.
std::shared_ptr<::gloo::transport::Device> listening_device(const std::string& master_addr) {
  if (auto iface = env::get("GLOO_SOCKET_IFNAME")) return c10d::ProcessGroupGloo::createDeviceForInterface(*iface);
  return c10d::ProcessGroupGloo::createDeviceForHostname(local_address_towards(master_addr));
}

class GlooBackend final : public C10dBackend<c10d::ProcessGroupGloo> {
 public:
  GlooBackend(const RendezvousInfo& where, const CommOptions& options) : rank_(where.rank), world_size_(where.world_size) {
    ZT_CHECK(!where.master_addr.empty() && where.master_port > 0, ConfigError,
             "the gloo backend needs MASTER_ADDR and MASTER_PORT to meet the other ranks (the ", to_string(where.source),
             " environment did not set them); under mpirun pass -x MASTER_ADDR=<host of rank 0> -x MASTER_PORT=<port>, "
             "or use the mpi backend");
    store_ = connect_store(master_store_address(where), rank_, world_size_, options.timeout);
    // Gloo's own connect timeout would not say who is missing.
    wait_for_ranks(*store_, rank_, world_size_, options.timeout, "the gloo backend");
    master_addr_ = where.master_addr;
    timeout_ = options.timeout;
    connect("zt/gloo");
    board_ = make_store_board(store_, rank_, world_size_);
  }

  // Member `rank` of a subgroup of `parent`, over the parent's store under `prefix`.
  GlooBackend(const GlooBackend& parent, int rank, int world_size, const std::string& prefix)
      : rank_(rank), world_size_(world_size) {
    store_ = parent.store_;
    master_addr_ = parent.master_addr_;
    timeout_ = parent.timeout_;
    connect(prefix);
    // Its own board, under the prefix. The shared-memory backend names missing ranks from the
    // job's board, so a cross-host timeout still names the job's ranks.
    board_ = make_store_board(c10::make_intrusive<c10d::PrefixStore>(prefix, store_), rank_, world_size_);
  }

  ~GlooBackend() override {
    if (abandoned_) {
      // Gloo's worker threads may be blocked on peers that are gone; destroying the process
      // group would join them. Leave it to the process exit instead.
      new c10::intrusive_ptr<c10d::ProcessGroupGloo>(std::move(pg_));
    }
  }

  c10d::Store* store() override { return store_.get(); }

  std::unique_ptr<Backend> subgroup(const std::vector<int>& members, const std::string& tag) override {
    const auto me = std::find(members.begin(), members.end(), rank_);
    if (me == members.end()) return nullptr;
    return std::make_unique<GlooBackend>(*this, static_cast<int>(me - members.begin()),
                                         static_cast<int>(members.size()), "zt/gloo/" + tag);
  }

  BackendKind kind() const override { return BackendKind::kGloo; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  // Measured on the pinned LibTorch (docs/comm.md): Gloo reduces every floating type,
  // bf16 included, and int64; its AVG rejects integers.
  bool reduces(at::ScalarType) const override { return true; }
  bool averages(at::ScalarType dtype) const override { return at::isFloatingType(dtype); }
  ProgressBoard& progress() override { return *board_; }
  void abandon() override { abandoned_ = true; }

 private:
  void connect(const std::string& prefix) {
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(timeout_);
    gloo_options->devices.push_back(listening_device(master_addr_));
    try {
      pg_ = c10::make_intrusive<c10d::ProcessGroupGloo>(c10::make_intrusive<c10d::PrefixStore>(prefix, store_), rank_,
                                                        world_size_, gloo_options);
    } catch (const std::exception& e) {
      throw CommError(str("rank ", rank_, " could not connect Gloo to the other ", world_size_ - 1, " ranks within ",
                          timeout_.count() / 1000.0, " s (", first_line(e),
                          "). Every rank must start and reach MASTER_ADDR; set GLOO_SOCKET_IFNAME to pick the network "
                          "interface"),
                      "rendezvous");
    }
  }

  int rank_;
  int world_size_;
  std::string master_addr_;
  std::chrono::milliseconds timeout_{};
  c10::intrusive_ptr<c10d::Store> store_;
  std::unique_ptr<ProgressBoard> board_;
  bool abandoned_ = false;
};

// Gloo writes to its peers' sockets without MSG_NOSIGNAL. Under SIGPIPE's default action a
// peer that died would then kill this rank too, silently and at once: the collective never
// reports which peer is gone, and the launcher may see this rank's death before the one that
// caused it and name the wrong rank. Ignored, the write fails with EPIPE and the collective
// throws a CommError naming the peer. A handler the program set itself is left alone (Python
// ignores SIGPIPE already).
void ignore_sigpipe_unless_handled() {
  struct sigaction current{};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL &&
      (current.sa_flags & SA_SIGINFO) == 0) {
    ::signal(SIGPIPE, SIG_IGN);
  }
}

}  // namespace

std::unique_ptr<Backend> make_gloo_backend(const RendezvousInfo& where, const CommOptions& options) {
  ignore_sigpipe_unless_handled();
  return std::make_unique<GlooBackend>(where, options);
}

}  // namespace zerotrain::comm::detail
