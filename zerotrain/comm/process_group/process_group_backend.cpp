// The backend over an adopted c10d process group (comm/process_group/process_group.h). It only
// forwards: the group's own backends own the transport, and the Communicator composes what
// they lack.
#include "zerotrain/comm/process_group/process_group.h"

#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "zerotrain/comm/c10d/c10d_backend.h"
#include "zerotrain/comm/rendezvous/store.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"

namespace zerotrain::comm {
namespace detail {
namespace {

// A board that knows nothing, for a group adopted without its store.
class NoBoard final : public ProgressBoard {
 public:
  explicit NoBoard(int world_size) : world_size_(world_size) {}
  void publish(int64_t, const std::string&) override {}
  std::vector<RankProgress> snapshot() override {
    std::vector<RankProgress> board(static_cast<size_t>(world_size_));
    for (int r = 0; r < world_size_; ++r) {
      board[static_cast<size_t>(r)] = {r, false, -1, "unknown (the adopted group's store was not given)"};
    }
    return board;
  }

 private:
  int world_size_;
};

class ProcessGroupBackend;

// The adopted groups' backends alive in this process, for release_adopted_groups().
struct LiveBackends {
  std::mutex mutex;
  std::set<ProcessGroupBackend*> backends;
};
LiveBackends& live_backends() {
  static auto* live = new LiveBackends();   // never destroyed: backends may outlive static destruction
  return *live;
}

class ProcessGroupBackend final : public C10dBackend<c10d::ProcessGroup> {
 public:
  explicit ProcessGroupBackend(AdoptedGroup adopted)
      : rank_(adopted.group->getRank()), world_size_(adopted.group->getSize()) {
    {
      std::lock_guard lock(live_backends().mutex);
      live_backends().backends.insert(this);
    }
    pg_ = std::move(adopted.group);
    const std::string name = pg_->getBackendName();
    // Gloo and NCCL reduce every floating type (bf16 included) and int64; anything else
    // (MPI builds differ) gets the Communicator's upcast for all but fp32/fp64.
    full_reductions_ = name.find("gloo") != std::string::npos || name.find("nccl") != std::string::npos;
    if (adopted.store) {
      board_ = make_store_board(std::move(adopted.store), rank_, world_size_);
    } else {
      board_ = std::make_unique<NoBoard>(world_size_);
    }
  }

  ~ProcessGroupBackend() override {
    std::lock_guard lock(live_backends().mutex);
    live_backends().backends.erase(this);
  }

  // The group, given up (null when it was already).
  c10::intrusive_ptr<c10d::ProcessGroup> release() { return std::exchange(pg_, {}); }

  BackendKind kind() const override { return BackendKind::kProcessGroup; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  bool reduces(at::ScalarType dtype) const override {
    return full_reductions_ || dtype == at::kFloat || dtype == at::kDouble || dtype == at::kLong;
  }
  // Not every backend behind a group averages (Gloo's AVG depends on the build); the
  // Communicator's sum-then-divide gives the same result on all of them.
  bool averages(at::ScalarType) const override { return false; }
  ProgressBoard& progress() override { return *board_; }

 private:
  int rank_;
  int world_size_;
  bool full_reductions_ = false;
  std::unique_ptr<ProgressBoard> board_;
};

}  // namespace
}  // namespace detail

int release_adopted_groups() {
  // Taken out under the lock, dropped after it: a group's destructor joins its threads.
  std::vector<c10::intrusive_ptr<c10d::ProcessGroup>> dropped;
  int released = 0;
  {
    std::lock_guard lock(detail::live_backends().mutex);
    for (auto* backend : detail::live_backends().backends) {
      if (auto group = backend->release()) {
        dropped.push_back(std::move(group));
        ++released;
      }
    }
  }
  return released;
}

namespace {
// ProcessGroup::hasBackendForDeviceType is newer than the oldest LibTorch this builds against
// (docs/gpu.md); getBackend, which throws where the group has none for the type, is in all.
bool has_backend_for(c10d::ProcessGroup& group, c10::DeviceType type) {
  try {
    return group.getBackend(type) != nullptr;
  } catch (const c10::Error&) {
    return false;
  }
}
}  // namespace

Communicator adopt_process_group(AdoptedGroup adopted, at::Device device, CommOptions options) {
  ZT_CHECK(adopted.group, ConfigError, "adopt_process_group: no process group given; call "
           "torch.distributed.init_process_group first, or let the engine open its own");
  ZT_CHECK(has_backend_for(*adopted.group, device.type()), ConfigError, "the torch.distributed process group (",
           adopted.group->getBackendName(), ") has no backend for ", device.type(), " tensors, where this engine "
           "trains; initialise it with a backend for them (gloo for CPU, nccl for CUDA, or "
           "\"cpu:gloo,cuda:nccl\"), or set \"comm\": {\"backend\": ...} so the engine opens its own group");
  options.backend = BackendKind::kProcessGroup;
  const auto group_name = adopted.group->getBackendName();
  auto comm = Communicator::from_backend(std::make_unique<detail::ProcessGroupBackend>(std::move(adopted)), options);
  if (comm.rank() == 0) {
    ZT_LOG_INFO("comm: torch.distributed's process group (", group_name, "), world size ", comm.world_size(),
                ", timeout ", options.timeout.count() / 1000.0, " s", options.check_fingerprints ? ", fingerprint checks on" : "");
  }
  return comm;
}

}  // namespace zerotrain::comm
