// NCCL (GPU). Built wherever the CUDA toolkit with NCCL is present; it cannot run on a
// machine without a GPU, so it is compiled and linked in CI but untested, and
// `zerotrain report` says so. Collectives run on CUDA's legacy default stream, which orders
// them after the LibTorch kernels that produced their inputs; a Work polls a CUDA event
// and NCCL's async error so that a stuck peer becomes a TimeoutError (ncclCommAbort).
#include <cuda_runtime.h>
#include <nccl.h>

#include <ATen/ATen.h>

#include <cstring>
#include <thread>

#include "zerotrain/comm/backend.h"
#include "zerotrain/comm/store.h"
#include "zerotrain/core/error.h"

namespace zerotrain::comm::detail {
namespace {

void check_cuda(cudaError_t code, const char* what) {
  ZT_CHECK(code == cudaSuccess, CommError, what, " failed: ", cudaGetErrorString(code));
}
void check_nccl(ncclResult_t code, const char* what) {
  ZT_CHECK(code == ncclSuccess, CommError, what, " failed: ", ncclGetErrorString(code));
}

ncclDataType_t nccl_type(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kLong: return ncclInt64;
    case at::kInt: return ncclInt32;
    case at::kChar: return ncclInt8;
    case at::kByte: return ncclUint8;
    default: throw NotSupported(str("the nccl backend cannot move ", c10::toString(dtype), " tensors"));
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAvg: return ncclAvg;
    case ReduceOp::kMax: return ncclMax;
  }
  ZT_INTERNAL_ASSERT(false, "unknown reduce op");
}

class NcclWork final : public WorkImpl {
 public:
  NcclWork(ncclComm_t comm, cudaEvent_t event) : comm_(comm), event_(event) {}
  ~NcclWork() override { cudaEventDestroy(event_); }
  bool wait_until(Clock::time_point deadline) override {
    while (!is_completed()) {
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return true;
  }
  bool is_completed() override {
    ncclResult_t async = ncclSuccess;
    check_nccl(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
    check_nccl(async, "an NCCL collective");
    const cudaError_t state = cudaEventQuery(event_);
    if (state == cudaErrorNotReady) return false;
    check_cuda(state, "cudaEventQuery");
    return true;
  }

 private:
  ncclComm_t comm_;
  cudaEvent_t event_;
};

class NcclBackend final : public Backend {
 public:
  NcclBackend(const RendezvousInfo& where, const CommOptions& options) : rank_(where.rank), world_size_(where.world_size) {
    ZT_CHECK(!where.master_addr.empty() && where.master_port > 0, ConfigError,
             "the nccl backend needs MASTER_ADDR and MASTER_PORT to exchange its unique id");
    check_cuda(cudaSetDevice(where.local_rank), "cudaSetDevice(LOCAL_RANK)");
    store_ = connect_store({where.master_addr, where.master_port}, rank_, world_size_, options.timeout);
    ncclUniqueId id;
    if (rank_ == 0) {
      check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
      store_->set("zt/nccl/id", std::vector<uint8_t>(id.internal, id.internal + sizeof(id.internal)));
    } else {
      auto bytes = store_->get("zt/nccl/id");
      ZT_CHECK(bytes.size() == sizeof(id.internal), CommError, "the NCCL unique id in the store has the wrong size");
      std::memcpy(id.internal, bytes.data(), bytes.size());
    }
    check_nccl(ncclCommInitRank(&comm_, world_size_, id, rank_), "ncclCommInitRank");
    board_ = make_store_board(store_, rank_, world_size_);
  }
  ~NcclBackend() override {
    if (abandoned_) {
      ncclCommAbort(comm_);
    } else {
      ncclCommDestroy(comm_);
    }
  }

  BackendKind kind() const override { return BackendKind::kNccl; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  bool reduces(at::ScalarType) const override { return true; }
  bool averages(at::ScalarType) const override { return true; }
  ProgressBoard& progress() override { return *board_; }
  void abandon() override { abandoned_ = true; }

  WorkPtr all_reduce(const at::Tensor& t, ReduceOp op) override {
    check_device(t);
    check_nccl(ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), nccl_type(t.scalar_type()), nccl_op(op), comm_, 0),
               "ncclAllReduce");
    return record();
  }
  WorkPtr reduce_scatter(const at::Tensor& in, const at::Tensor& out, ReduceOp op) override {
    check_device(in);
    check_nccl(ncclReduceScatter(in.data_ptr(), out.data_ptr(), out.numel(), nccl_type(in.scalar_type()), nccl_op(op),
                                 comm_, 0),
               "ncclReduceScatter");
    return record();
  }
  WorkPtr all_gather(const at::Tensor& in, const at::Tensor& out) override {
    check_device(in);
    check_nccl(ncclAllGather(in.data_ptr(), out.data_ptr(), in.numel(), nccl_type(in.scalar_type()), comm_, 0),
               "ncclAllGather");
    return record();
  }
  WorkPtr broadcast(const at::Tensor& t, int root) override {
    check_device(t);
    check_nccl(ncclBroadcast(t.data_ptr(), t.data_ptr(), t.numel(), nccl_type(t.scalar_type()), root, comm_, 0),
               "ncclBroadcast");
    return record();
  }
  WorkPtr barrier() override {
    // NCCL has no barrier: an all_reduce of one element serves.
    if (!barrier_buffer_.defined()) barrier_buffer_ = at::zeros({1}, at::TensorOptions().device(at::kCUDA));
    return all_reduce(barrier_buffer_, ReduceOp::kSum);
  }

 private:
  static void check_device(const at::Tensor& t) {
    ZT_CHECK(t.is_cuda(), UsageError, "the nccl backend takes CUDA tensors; this one is on ", t.device(),
             " (use gloo or mpi for CPU tensors)");
  }
  WorkPtr record() {
    cudaEvent_t event;
    check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventRecord(event, 0), "cudaEventRecord");
    return std::make_shared<NcclWork>(comm_, event);
  }

  int rank_;
  int world_size_;
  c10::intrusive_ptr<c10d::Store> store_;
  ncclComm_t comm_ = nullptr;
  std::unique_ptr<ProgressBoard> board_;
  at::Tensor barrier_buffer_;   // (1,) fp32 on this rank's GPU
  bool abandoned_ = false;
};

}  // namespace

bool nccl_compiled() { return true; }

std::unique_ptr<Backend> make_nccl_backend(const RendezvousInfo& where, const CommOptions& options) {
  return std::make_unique<NcclBackend>(where, options);
}

}  // namespace zerotrain::comm::detail
