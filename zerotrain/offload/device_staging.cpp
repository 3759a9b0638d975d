#include "zerotrain/offload/device_staging.h"

#include <ATen/ATen.h>
#include <ATen/DeviceAccelerator.h>

#include "zerotrain/core/error.h"

namespace zerotrain::offload {
namespace {

// A pinned host tensor like `t`, reusing `buffer` when it already fits.
const at::Tensor& pinned_like(at::Tensor& buffer, const at::Tensor& t) {
  if (!buffer.defined() || buffer.numel() != t.numel() || buffer.scalar_type() != t.scalar_type()) {
    buffer = at::empty({t.numel()}, at::TensorOptions(t.scalar_type()).pinned_memory(true));
  }
  return buffer;
}

}  // namespace

void DeviceStaging::start_gradients(size_t group, const at::Tensor& gradients) {
  if (gradients_.size() <= group) gradients_.resize(group + 1);
  if (gradients.is_cpu()) {
    gradients_[group] = gradients;
    return;
  }
  if (pinned_gradients_.size() <= group) pinned_gradients_.resize(group + 1);
  const at::Tensor& host = pinned_like(pinned_gradients_[group], gradients);
  host.copy_(gradients.reshape({-1}), /*non_blocking=*/true);
  gradients_[group] = host;
  pending_ = true;
}

void DeviceStaging::wait_gradients() {
  if (!pending_) return;
  // The downloads were queued on the current stream after the backward that produced the
  // gradients; waiting for the device makes them readable here.
  at::accelerator::synchronizeDevice(at::accelerator::getDeviceIndex());
  pending_ = false;
}

const at::Tensor& DeviceStaging::host_gradients(size_t group) const {
  ZT_INTERNAL_ASSERT(group < gradients_.size() && gradients_[group].defined() && !pending_,
                     "host_gradients before start_gradients/wait_gradients");
  return gradients_[group];
}

at::Tensor DeviceStaging::host_weights(size_t group, size_t piece, const at::Tensor& weights) {
  if (weights.is_cpu()) return weights;
  return pinned_like(weights_[{group, piece}], weights);
}

void DeviceStaging::finish_weights(size_t group, size_t piece, const at::Tensor& weights) {
  if (weights.is_cpu()) return;
  weights.view({-1}).copy_(weights_.at({group, piece}), /*non_blocking=*/true);
}

int64_t DeviceStaging::host_nbytes() const {
  int64_t n = 0;
  for (const auto& t : pinned_gradients_) n += t.defined() ? static_cast<int64_t>(t.nbytes()) : 0;
  for (const auto& [key, t] : weights_) n += static_cast<int64_t>(t.nbytes());
  return n;
}

}  // namespace zerotrain::offload
