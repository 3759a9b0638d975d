// Gradient bucket buffers kept from one backward to the next (stages 2 and 3). A new tensor
// per bucket per backward costs the kernel's page faults, not just the zeroing: filling a
// fresh 0.5 GB buffer takes about 0.3 s on a 2-core VM, zeroing a reused one 0.04 s. The
// allocator hands such sizes straight back to the kernel (glibc maps anything over 32 MiB
// on its own), so only keeping them avoids that. Which buffer serves which bucket:
// buffer_pool.h.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>

#include "zerotrain/stages/buffer_pool.h"
#include "zerotrain/stages/staging.h"

namespace zerotrain::stages {

class StagingPool {
 public:
  // `kept`: how many buffers may exist at once (stages/plan.h, staging_buffers_kept).
  // `meter` counts every buffer the pool holds, lent or spare: spares are memory too.
  StagingPool(std::size_t kept, StagingMeter* meter) : pool_(kept), meter_(meter) {}

  // A buffer of `numel` elements of `options`: a view of a kept one, or a new one. Its
  // contents are whatever its last user left: the caller writes every element. `lent` is
  // what to give back.
  struct Loan {
    at::Tensor buffer;   // (numel,)
    at::Tensor lent;     // the whole buffer
  };
  Loan take(int64_t numel, const at::TensorOptions& options);
  // The buffer is free again (its reduction finished).
  void give_back(at::Tensor lent) noexcept;

 private:
  BufferPool<at::Tensor> pool_;
  StagingMeter* meter_;
};

}  // namespace zerotrain::stages
