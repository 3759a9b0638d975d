// Gloo (CPU, TCP) through c10d's ProcessGroupGloo from the LibTorch wheel. The wheel ships
// no Gloo headers; Debian's libgloo-dev provides them (docs/notes/comm-backends.md says
// why that is safe: we only hold Gloo objects through pointers).
#define USE_C10D_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "zerotrain/comm/c10d_backend.h"
#include "zerotrain/comm/store.h"
#include "zerotrain/core/env.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"

namespace zerotrain::comm::detail {
namespace {

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
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
    if (auto iface = env::get("GLOO_SOCKET_IFNAME")) {
      gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(*iface));
    } else {
      gloo_options->devices.push_back(
          c10d::ProcessGroupGloo::createDeviceForHostname(local_address_towards(where.master_addr)));
    }
    try {
      pg_ = c10::make_intrusive<c10d::ProcessGroupGloo>(
          c10::make_intrusive<c10d::PrefixStore>("zt/gloo", store_), rank_, world_size_, gloo_options);
    } catch (const std::exception& e) {
      throw CommError(str("rank ", rank_, " could not connect Gloo to the other ", world_size_ - 1, " ranks within ",
                          options.timeout.count() / 1000.0, " s (", first_line(e),
                          "). Every rank must start and reach MASTER_ADDR; set GLOO_SOCKET_IFNAME to pick the network "
                          "interface"),
                      "rendezvous");
    }
    board_ = make_store_board(store_, rank_, world_size_);
  }

  ~GlooBackend() override {
    if (abandoned_) {
      // Gloo's worker threads may be blocked on peers that are gone; destroying the process
      // group would join them. Leave it to the process exit instead.
      new c10::intrusive_ptr<c10d::ProcessGroupGloo>(std::move(pg_));
    }
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
  int rank_;
  int world_size_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::unique_ptr<ProgressBoard> board_;
  bool abandoned_ = false;
};

}  // namespace

std::unique_ptr<Backend> make_gloo_backend(const RendezvousInfo& where, const CommOptions& options) {
  return std::make_unique<GlooBackend>(where, options);
}

}  // namespace zerotrain::comm::detail
