// Activation checkpointing (docs/activation-checkpointing.md): a segment of the forward runs
// without keeping its intermediate activations, and backward runs the segment again to get
// them. Memory falls from every activation of the segment to its inputs; the price is a
// second forward of the segment. The behaviour is PyTorch's torch.utils.checkpoint with
// use_reentrant=True, which DeepSpeed's deepspeed.checkpointing.checkpoint also follows:
//
//   x = zerotrain::activation::checkpoint([&](const at::Tensor& in) { return block(in); }, x);
//
// - The recomputation sees the random numbers the first forward saw (dropout draws the
//   same mask), and the caller's random stream after backward is what it would have been
//   without recomputation.
// - Only inputs that require grad get a gradient. As with use_reentrant=True, a segment
//   none of whose inputs requires grad gives its parameters no gradient either (a warning
//   says so once): checkpoint blocks whose input comes from a trained layer.
// - Under torch::NoGradGuard (evaluation) the segment just runs.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace zerotrain::config {
struct ActivationCheckpointingConfig;
}

namespace zerotrain::activation {

// DeepSpeed's `activation_checkpointing` block, as this engine reads it (the keys are named
// as there; partition_activations is refused at config validation: it needs model
// parallelism).
struct CheckpointOptions {
  // Keep each segment's saved inputs in host memory until its backward (a no-op for a
  // model on the CPU).
  bool cpu_checkpointing = false;
  // Copy the saved inputs of consecutive segments into one buffer of `number_checkpoints`
  // slots, allocated once per forward pass, instead of keeping each input's own memory
  // (fewer, larger allocations; the same bytes). Needs number_checkpoints.
  bool contiguous_memory_optimization = false;
  // How many segments one forward pass checkpoints (the slots of the contiguous buffer).
  std::optional<int64_t> number_checkpoints;
  // Synchronize the device at each segment's forward and recomputation (nothing to wait
  // for on the CPU: there it does nothing).
  bool synchronize_checkpoint_boundary = false;
  // Time each segment's forward and recomputation: logged at debug level, and summed in
  // Checkpointer::profile().
  bool profile = false;
};

// Throws ConfigError for a block this engine cannot run (partition_activations).
CheckpointOptions options_from_config(const config::ActivationCheckpointingConfig& config);

// What `profile` measured, summed over the segments of one Checkpointer.
struct CheckpointProfile {
  int64_t forwards = 0;     // segments run forward without keeping activations
  double forward_s = 0;
  int64_t recomputes = 0;   // segments run again in backward
  double recompute_s = 0;
};

using SegmentFn = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;
using TensorFn = std::function<at::Tensor(const at::Tensor&)>;

namespace detail {
struct CheckpointState;
}

// Checkpoints segments with one set of options. What lasts across segments lives here: the
// contiguous buffer the segments of a forward pass share, and the profile. A model keeps
// one (the gpt does); the graph of each checkpointed segment holds the state until its
// backward, so the Checkpointer may go first.
class Checkpointer {
 public:
  // Throws ConfigError for contiguous_memory_optimization without number_checkpoints.
  explicit Checkpointer(CheckpointOptions options = {});
  // fn(inputs) in the forward; in backward, fn(inputs) again. fn must compute the same
  // function of its inputs both times (the parameters it reads may not change in between).
  std::vector<at::Tensor> operator()(const SegmentFn& fn, const std::vector<at::Tensor>& inputs) const;
  at::Tensor operator()(const TensorFn& fn, const at::Tensor& input) const;

  const CheckpointOptions& options() const;
  CheckpointProfile profile() const;   // zero unless options().profile

 private:
  std::shared_ptr<detail::CheckpointState> state_;
};

// One segment with a Checkpointer of its own (so contiguous_memory_optimization packs
// nothing across calls, and the profile goes to the debug log only).
std::vector<at::Tensor> checkpoint(const SegmentFn& fn, const std::vector<at::Tensor>& inputs,
                                   const CheckpointOptions& options = {});
at::Tensor checkpoint(const TensorFn& fn, const at::Tensor& input, const CheckpointOptions& options = {});

}  // namespace zerotrain::activation
