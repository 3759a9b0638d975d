// ZeRO-Offload from a GPU: the optimizer step runs on the CPU (fused_step.cpp), so a stage
// whose gradients and weights live on a GPU hands them over through pinned host buffers.
// Gradients come down with asynchronous copies issued for every group at once; each piece of
// new 16-bit weights goes back up with an asynchronous copy as soon as it is complete, so the
// uploads overlap the rest of the step. For a CPU stage every call is the identity: no copy.
// Internal to offload/.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <utility>
#include <vector>

namespace zerotrain::offload {

class DeviceStaging {
 public:
  // Starts the download of group `group`'s gradient shard (a no-op on the CPU).
  void start_gradients(size_t group, const at::Tensor& gradients);
  // Waits for every download started; after it, host_gradients() may be read.
  void wait_gradients();
  // The host copy of group `group`'s gradient shard (the shard itself on the CPU).
  const at::Tensor& host_gradients(size_t group) const;

  // Where the step writes piece `piece` of group `group`: the piece's own tensor on the CPU,
  // else a pinned buffer of its size and dtype (kept across steps).
  at::Tensor host_weights(size_t group, size_t piece, const at::Tensor& weights);
  // The piece is complete: starts its upload into `weights` (a no-op on the CPU). The copy is
  // ordered on the current stream before any later kernel, and the next step's first
  // wait_gradients() comes after it, so the pinned buffer is not rewritten while it is read.
  void finish_weights(size_t group, size_t piece, const at::Tensor& weights);

  // Pinned bytes held (the estimator's "host staging" of a GPU offload).
  int64_t host_nbytes() const;

 private:
  std::vector<at::Tensor> gradients_;                        // per group: host view
  std::map<std::pair<size_t, size_t>, at::Tensor> weights_;   // per (group, piece): pinned buffer
  std::vector<at::Tensor> pinned_gradients_;                 // per group: pinned buffer (GPU stage only)
  bool pending_ = false;
};

}  // namespace zerotrain::offload
