// NCCL (GPU) through c10d's ProcessGroupNCCL from the wheel's libtorch_cuda, as the Gloo
// backend goes through ProcessGroupGloo. ProcessGroupNCCL runs each collective on its own
// stream, after an event recorded on the caller's current stream (so it reads what the
// kernels before it wrote), and keeps the tensors alive until the collective ends (the
// caching allocator's record_stream). We wrap its Work so that a stuck peer becomes our
// TimeoutError, naming the collective and the missing ranks, like the CPU backends.
//
// Each rank drives one GPU: cuda:LOCAL_RANK. NCCL refuses two ranks on one GPU, so ranks
// that share a GPU use gloo (which moves CUDA tensors too).
#define USE_C10D_NCCL 1
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <c10/cuda/CUDAFunctions.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "zerotrain/comm/backend.h"
#include "zerotrain/comm/c10d/c10d_flat.h"
#include "zerotrain/comm/rendezvous/store.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"

namespace zerotrain::comm::detail {
namespace {

using namespace std::chrono_literals;

// How often a wait looks at the GPU: short beside any collective worth overlapping, long
// enough not to spin a core.
constexpr auto kPollInterval = 50us;

// ProcessGroupNCCL's watchdog ends the whole process when a collective outlives the group's
// timeout, with a message that names neither our collective nor the missing ranks. Its
// timeout is therefore ours plus this margin, so that our wait gives up first, says who is
// missing, and aborts the group (abandon()) before the watchdog would act.
std::chrono::milliseconds watchdog_timeout(std::chrono::milliseconds ours) {
  return ours + std::max<std::chrono::milliseconds>(10s, ours / 10);
}

// The GPU this rank drives, checked before anything touches CUDA or the network.
at::Device choose_device(const RendezvousInfo& where) {
  const int visible = static_cast<int>(c10::cuda::device_count());
  ZT_CHECK(visible > 0, ConfigError,
           "the nccl backend needs a GPU; none is visible (torch::cuda::device_count() == 0): use gloo or mpi on "
           "CPU");
  ZT_CHECK(where.local_rank < visible, ConfigError, "the nccl backend gives each rank its own GPU, cuda:LOCAL_RANK, but "
           "LOCAL_RANK is ", where.local_rank, " and this process sees ", visible, " GPU", visible == 1 ? "" : "s",
           ": start at most ", visible, " rank", visible == 1 ? "" : "s", " per node, make CUDA_VISIBLE_DEVICES list "
           "one GPU per local rank, or use the gloo backend to share a GPU between ranks (NCCL refuses two ranks on "
           "one GPU)");
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(where.local_rank));
}

class NcclWork final : public WorkImpl {
 public:
  explicit NcclWork(c10::intrusive_ptr<c10d::Work> work) : work_(std::move(work)) {}

  bool wait_until(Clock::time_point deadline) override {
    // Polled here rather than with c10d's timed wait, which on a timeout fails the work on
    // its own terms and aborts the communicator before we could name the missing ranks.
    while (!work_->isCompleted()) {   // also true once the work failed
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(kPollInterval);
    }
    // Done on the GPU (or failed): wait() rethrows a failure, and orders the caller's current
    // stream after the collective's, so the kernels that read the results come after it.
    work_->wait();
    return true;
  }
  bool is_completed() override { return work_->isCompleted(); }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
};

class NcclBackend final : public Backend {
 public:
  NcclBackend(const RendezvousInfo& where, const CommOptions& options)
      : rank_(where.rank), world_size_(where.world_size), device_(choose_device(where)) {
    c10::cuda::set_device(device_.index());
    if (world_size_ == 1) {
      // Nobody to meet: the group's own bookkeeping goes to an in-process store, so a single
      // process needs no MASTER_ADDR/MASTER_PORT.
      store_ = c10::make_intrusive<c10d::HashStore>();
    } else {
      ZT_CHECK(!where.master_addr.empty() && where.master_port > 0, ConfigError,
               "the nccl backend needs MASTER_ADDR and MASTER_PORT to meet the other ranks (the ",
               to_string(where.source), " environment did not set them); `zerotrain launch` and torchrun set both");
      store_ = connect_store(master_store_address(where), rank_, world_size_, options.timeout);
      // NCCL's own connection has no timeout that would say who is missing.
      wait_for_ranks(*store_, rank_, world_size_, options.timeout, "the nccl backend");
    }
    auto pg_options = c10d::ProcessGroupNCCL::Options::create();
    pg_options->timeout = watchdog_timeout(options.timeout);
    pg_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(c10::make_intrusive<c10d::PrefixStore>("zt/nccl", store_),
                                                     rank_, world_size_, pg_options);
    board_ = make_store_board(store_, rank_, world_size_);
  }

  ~NcclBackend() override {
    if (abandoned_) {
      // abandon() aborted the group; its threads may still hold it. Leave it to the exit.
      new c10::intrusive_ptr<c10d::ProcessGroupNCCL>(std::move(pg_));
      return;
    }
    try {
      pg_->shutdown();   // without it, c10d warns that the group was not destroyed
    } catch (const std::exception& e) {
      ZT_LOG_WARN("comm: shutting down the nccl process group failed: ", first_line(e));
    }
  }

  BackendKind kind() const override { return BackendKind::kNccl; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  // NCCL reduces every dtype the Communicator offers. Its average of integers is left to
  // the Communicator (sum, then a truncating division), as on gloo and mpi, so that every
  // backend gives the same integers.
  bool reduces(at::ScalarType) const override { return true; }
  bool averages(at::ScalarType dtype) const override { return at::isFloatingType(dtype); }
  ProgressBoard& progress() override { return *board_; }
  at::Device exchange_device(at::Device) const override { return device_; }

  void abandon() override {
    if (abandoned_) return;
    abandoned_ = true;
    // Aborting the communicators ends the kernels stuck waiting for peers (a later CUDA call
    // or the process exit would wait on them) and stops the watchdog from acting on them.
    try {
      pg_->abort();
    } catch (const std::exception& e) {
      ZT_LOG_WARN("comm: aborting the nccl process group failed: ", first_line(e));
    }
  }

  WorkPtr all_reduce(const at::Tensor& tensor, ReduceOp op) override {
    check_device(tensor);
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions o;
    o.reduceOp = to_c10d(op);
    return wrap(pg_->allreduce(tensors, o));
  }
  WorkPtr reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op) override {
    check_device(input);
    check_device(output);
    at::Tensor in = input, out = output;
    c10d::ReduceScatterOptions o;
    o.reduceOp = to_c10d(op);
    return wrap(reduce_scatter_flat(*pg_, out, in, o));
  }
  WorkPtr all_gather(const at::Tensor& input, const at::Tensor& output) override {
    check_device(input);
    check_device(output);
    at::Tensor in = input, out = output;
    return wrap(all_gather_flat(*pg_, out, in));
  }
  WorkPtr broadcast(const at::Tensor& tensor, int root) override {
    check_device(tensor);
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    return wrap(pg_->broadcast(tensors, o));
  }
  WorkPtr barrier() override {
    // On this rank's GPU: without device_ids c10d guesses one from the rank.
    c10d::BarrierOptions o;
    o.device_ids = {device_.index()};
    return wrap(pg_->barrier(o));
  }

 private:
  void check_device(const at::Tensor& t) const {
    ZT_CHECK(t.is_cuda(), UsageError, "the nccl backend takes CUDA tensors; this one is on ", t.device(),
             " (move it to ", device_, ", or use gloo or mpi for CPU tensors)");
    ZT_CHECK(t.device() == device_, UsageError, "the nccl backend of rank ", rank_, " drives ", device_,
             " (LOCAL_RANK), but this tensor is on ", t.device(), "; move it to ", device_);
  }
  static WorkPtr wrap(c10::intrusive_ptr<c10d::Work> work) { return std::make_shared<NcclWork>(std::move(work)); }

  int rank_;
  int world_size_;
  at::Device device_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> pg_;
  std::unique_ptr<ProgressBoard> board_;
  bool abandoned_ = false;
};

}  // namespace
}  // namespace zerotrain::comm::detail

// The plugin's entry point, which comm/nccl/nccl_loader.cpp looks up by name. The plugin
// defines no other symbol that a program also defines: it is linked without -Bsymbolic, so that
// its calls into the C++ runtime bind to the program's copy (a second copy, bound privately,
// would see locale facets registered with the first: an integer formatted here crashed on a
// toolchain that links libstdc++ into each binary).
extern "C" __attribute__((visibility("default"))) zerotrain::comm::detail::Backend* zerotrain_make_nccl_backend(
    const zerotrain::comm::RendezvousInfo& where, const zerotrain::comm::CommOptions& options) {
  return new zerotrain::comm::detail::NcclBackend(where, options);
}
