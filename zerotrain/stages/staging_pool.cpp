#include "zerotrain/stages/staging_pool.h"

#include <ATen/ATen.h>

#include "zerotrain/core/error.h"

namespace zerotrain::stages {

StagingPool::Loan StagingPool::take(int64_t numel, const at::TensorOptions& options) {
  at::Tensor lent = pool_.take(
      numel, [&](int64_t n) { return meter_->track(at::empty({n}, options)); },
      [&](const at::Tensor& gone) { meter_->release(gone); });
  // One pool serves one dtype and device: the stage's communication dtype on its device.
  ZT_INTERNAL_ASSERT(lent.scalar_type() == options.dtype().toScalarType() && lent.device() == options.device(),
                     "a staging buffer of another dtype or device");
  return {lent.narrow(0, 0, numel), lent};
}

void StagingPool::give_back(at::Tensor lent) noexcept {
  pool_.give_back(std::move(lent), [&](const at::Tensor& gone) { meter_->release(gone); });
}

}  // namespace zerotrain::stages
