// What the backends over a c10d process group share (gloo, nccl, and a group made by
// torch.distributed): our reduce ops in c10d's terms, the wait of a host-side c10d Work, and
// the flat collectives across the LibTorch versions we build against:
// reduce_scatter_single/all_gather_single in the pinned LibTorch 2.15,
// _reduce_scatter_base/_allgather_base before the rename (2.11, which an offline GPU machine
// may have). Same arguments. Internal to comm/; include after the process group's header.
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <algorithm>

#include "zerotrain/comm/types.h"
#include "zerotrain/comm/work.h"

namespace zerotrain::comm::detail {

inline c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return c10d::ReduceOp::SUM;
    case ReduceOp::kAvg: return c10d::ReduceOp::AVG;
    case ReduceOp::kMax: return c10d::ReduceOp::MAX;
  }
  ZT_INTERNAL_ASSERT(false, "unknown reduce op");
}

// A c10d Work that completes on the host (Gloo's; any backend's for CPU tensors).
class C10dWork final : public WorkImpl {
 public:
  explicit C10dWork(c10::intrusive_ptr<c10d::Work> work) : work_(std::move(work)) {}

  bool wait_until(Clock::time_point deadline) override {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    try {
      // c10d treats 0 ms as "no timeout", so wait at least 1 ms.
      work_->wait(std::max(left, std::chrono::milliseconds(1)));
    } catch (const std::exception&) {
      if (!work_->isCompleted()) return false;   // c10d's "Operation timed out!"
      throw;
    }
    return true;
  }
  bool is_completed() override { return work_->isCompleted(); }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
};

template <class PG>
c10::intrusive_ptr<c10d::Work> reduce_scatter_flat(PG& pg, at::Tensor& out, at::Tensor& in,
                                                   const c10d::ReduceScatterOptions& o) {
  if constexpr (requires { pg.reduce_scatter_single(out, in, o); }) {
    return pg.reduce_scatter_single(out, in, o);
  } else {
    return pg._reduce_scatter_base(out, in, o);
  }
}

template <class PG>
c10::intrusive_ptr<c10d::Work> all_gather_flat(PG& pg, at::Tensor& out, at::Tensor& in) {
  if constexpr (requires { pg.all_gather_single(out, in); }) {
    return pg.all_gather_single(out, in);
  } else {
    return pg._allgather_base(out, in);
  }
}

}  // namespace zerotrain::comm::detail
