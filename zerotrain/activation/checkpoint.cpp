#include "zerotrain/activation/checkpoint.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/DeviceAccelerator.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/custom_class.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <utility>

#include "zerotrain/config/schema_misc.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"

namespace zerotrain::activation {

// A buffer whose slots hold the saved inputs of consecutive segments
// (contiguous_memory_optimization). Each saved input is a view of it, so the memory goes
// when the last segment that used it has run its backward.
struct Arena {
  at::Tensor bytes;
  int64_t slot_bytes = 0;
  int64_t slots = 0;
  int64_t used = 0;
};

namespace detail {

struct CheckpointState {
  explicit CheckpointState(CheckpointOptions o) : options(std::move(o)) {}
  const CheckpointOptions options;
  std::mutex mutex;   // the arena and the profile (ranks may run as threads of one process)
  std::shared_ptr<Arena> arena;
  CheckpointProfile profile;
};

}  // namespace detail

namespace {

using detail::CheckpointState;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kAlignBytes = 64;
int64_t aligned(int64_t n) { return (n + kAlignBytes - 1) / kAlignBytes * kAlignBytes; }

// The random state of the CPU generator and of the CUDA devices the segment's inputs are
// on: what the segment draws from (PyTorch's preserve_rng_state saves the same ones).
struct RngStates {
  at::Tensor cpu;
  std::vector<std::pair<c10::DeviceIndex, at::Tensor>> cuda;
};

RngStates capture_rng(const std::vector<c10::DeviceIndex>& cuda_devices) {
  RngStates s;
  {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    s.cpu = gen.get_state();
  }
  for (c10::DeviceIndex d : cuda_devices) {
    at::Generator gen = at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, d));
    std::lock_guard<std::mutex> lock(gen.mutex());
    s.cuda.emplace_back(d, gen.get_state());
  }
  return s;
}

void restore_rng(const RngStates& s) {
  {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(s.cpu);
  }
  for (const auto& [d, state] : s.cuda) {
    at::Generator gen = at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, d));
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(state);
  }
}

std::vector<c10::DeviceIndex> cuda_devices_of(const std::vector<at::Tensor>& tensors) {
  std::vector<c10::DeviceIndex> devices;
  for (const auto& t : tensors) {
    if (!t.defined() || !t.is_cuda()) continue;
    if (std::find(devices.begin(), devices.end(), t.device().index()) == devices.end()) {
      devices.push_back(t.device().index());
    }
  }
  return devices;
}

// synchronize_checkpoint_boundary, and honest profile times: device kernels run
// asynchronously, so a clock read needs the device finished first. On the CPU there is
// nothing to wait for.
void synchronize(const std::vector<c10::DeviceIndex>& cuda_devices) {
  for (c10::DeviceIndex d : cuda_devices) at::accelerator::synchronizeDevice(d);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// What one checkpointed segment keeps for its backward besides the inputs autograd saves.
struct Segment : torch::CustomClassHolder {
  SegmentFn fn;
  std::shared_ptr<CheckpointState> state;
  std::vector<bool> requires_grad;
  std::vector<c10::Device> devices;          // each input's, to bring copies back
  std::vector<c10::DeviceIndex> cuda_devices;
  RngStates rng;
  bool copied = false;                       // inputs kept as copies (host or contiguous buffer)
  std::vector<at::Tensor> copies;            // ... then here, else saved by autograd
  bool done = false;
};

// The inputs copied into this state's contiguous buffer (on `device`), a new buffer of
// number_checkpoints slots when the current one is full, on another device, or too small.
std::vector<at::Tensor> pack_contiguous(CheckpointState& state, const std::vector<at::Tensor>& inputs,
                                        c10::Device device) {
  int64_t needed = 0;
  for (const auto& t : inputs) {
    if (t.defined()) needed += aligned(static_cast<int64_t>(t.nbytes()));
  }
  std::shared_ptr<Arena> arena;
  int64_t slot = 0;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    std::shared_ptr<Arena>& current = state.arena;
    if (!current || current->slot_bytes < needed || current->bytes.device() != device) {
      current = std::make_shared<Arena>();
      current->slots = *state.options.number_checkpoints;
      current->slot_bytes = needed;
      current->bytes = at::empty({needed * current->slots}, at::TensorOptions().dtype(at::kByte).device(device));
    }
    arena = current;
    slot = current->used++;
    // The last slot taken: the next forward pass starts a buffer of its own, and this one
    // lives only as long as the views in it.
    if (current->used == current->slots) current.reset();
  }
  std::vector<at::Tensor> packed;
  int64_t offset = slot * arena->slot_bytes;
  for (const auto& t : inputs) {
    if (!t.defined()) {
      packed.emplace_back();
      continue;
    }
    const int64_t itemsize = static_cast<int64_t>(t.element_size());
    at::Tensor view = at::empty({0}, t.options().device(device));
    view.set_(arena->bytes.storage(), offset / itemsize, t.sizes());
    view.copy_(t);
    packed.push_back(view);
    offset += aligned(static_cast<int64_t>(t.nbytes()));
  }
  return packed;
}

struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  // The inputs as a TensorList: that is how Function::apply sees each one as an input of
  // the node (a std::vector would count as one argument that is not a tensor).
  static variable_list forward(AutogradContext* ctx, at::TensorList input_list, c10::IValue segment_value) {
    const variable_list inputs = input_list.vec();
    auto segment = c10::static_intrusive_pointer_cast<Segment>(segment_value.toCapsule());
    const CheckpointOptions& options = segment->state->options;
    for (const auto& t : inputs) {
      segment->requires_grad.push_back(t.defined() && t.requires_grad());
      segment->devices.push_back(t.defined() ? t.device() : c10::Device(c10::kCPU));
    }
    segment->cuda_devices = cuda_devices_of(inputs);
    if (options.synchronize_checkpoint_boundary) synchronize(segment->cuda_devices);
    const auto start = std::chrono::steady_clock::now();
    segment->rng = capture_rng(segment->cuda_devices);

    const bool to_host = options.cpu_checkpointing && !segment->cuda_devices.empty();
    if (options.contiguous_memory_optimization) {
      // One buffer per forward pass; on the host with cpu_checkpointing.
      const c10::Device where = to_host || segment->cuda_devices.empty()
                                    ? c10::Device(c10::kCPU)
                                    : c10::Device(c10::kCUDA, segment->cuda_devices.front());
      std::vector<at::Tensor> detached;
      for (const auto& t : inputs) detached.push_back(t.defined() ? t.detach() : t);
      segment->copies = pack_contiguous(*segment->state, detached, where);
      segment->copied = true;
    } else if (to_host) {
      for (const auto& t : inputs) segment->copies.push_back(t.defined() ? t.detach().to(at::kCPU) : t);
      segment->copied = true;
    } else {
      // Autograd's own saving: a later in-place change of an input is caught at backward.
      ctx->save_for_backward(inputs);
    }
    ctx->saved_data["segment"] = std::move(segment_value);

    variable_list outputs = segment->fn(inputs);
    if (options.profile) {
      synchronize(segment->cuda_devices);
      const double s = seconds_since(start);
      std::lock_guard<std::mutex> lock(segment->state->mutex);
      ++segment->state->profile.forwards;
      segment->state->profile.forward_s += s;
      ZT_LOG_DEBUG("activation checkpoint: segment forward ", s * 1e3, " ms");
    }
    return outputs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto segment = c10::static_intrusive_pointer_cast<Segment>(ctx->saved_data["segment"].toCapsule());
    const CheckpointOptions& options = segment->state->options;
    ZT_CHECK(!segment->done || !segment->copied, UsageError,
             "a checkpointed segment ran backward twice, but its saved inputs (cpu_checkpointing or "
             "contiguous_memory_optimization) were freed after the first; run the forward again before each "
             "backward");
    std::vector<at::Tensor> inputs;
    if (segment->copied) {
      for (size_t i = 0; i < segment->copies.size(); ++i) {
        const at::Tensor& c = segment->copies[i];
        inputs.push_back(c.defined() ? c.to(segment->devices[i]) : c);
      }
    } else {
      inputs = ctx->get_saved_variables();
    }
    // Leaves of the recomputed graph, requiring grad as the originals did.
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].defined()) continue;
      inputs[i] = inputs[i].detach();
      inputs[i].set_requires_grad(segment->requires_grad[i]);
    }

    if (options.synchronize_checkpoint_boundary) synchronize(segment->cuda_devices);
    const auto start = std::chrono::steady_clock::now();
    variable_list outputs;
    {
      // The forward's random numbers again, then the caller's stream where it was.
      const RngStates before = capture_rng(segment->cuda_devices);
      restore_rng(segment->rng);
      struct Restore {
        const RngStates& states;
        ~Restore() { restore_rng(states); }
      } restore{before};
      at::AutoGradMode grad_mode(true);
      outputs = segment->fn(inputs);
    }
    if (options.profile) {
      synchronize(segment->cuda_devices);
      const double s = seconds_since(start);
      std::lock_guard<std::mutex> lock(segment->state->mutex);
      ++segment->state->profile.recomputes;
      segment->state->profile.recompute_s += s;
      ZT_LOG_DEBUG("activation checkpoint: segment recomputed in ", s * 1e3, " ms");
    }

    // Backward through the recomputed outputs that carry a gradient: into the parameters
    // fn reads (their gradients accumulate as usual) and into the detached inputs.
    ZT_CHECK(outputs.size() == grad_outputs.size(), UsageError, "a checkpointed segment returned ",
             outputs.size(), " tensors when recomputed but ", grad_outputs.size(),
             " in its forward; the function must compute the same thing both times");
    variable_list with_grad, grads;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i].defined() && outputs[i].requires_grad() && grad_outputs[i].defined()) {
        with_grad.push_back(outputs[i]);
        grads.push_back(grad_outputs[i]);
      }
    }
    if (!with_grad.empty()) torch::autograd::backward(with_grad, grads);

    variable_list input_grads;
    for (size_t i = 0; i < inputs.size(); ++i) {
      input_grads.push_back(inputs[i].defined() && segment->requires_grad[i] ? inputs[i].grad() : at::Tensor());
    }
    segment->done = true;
    segment->copies.clear();   // the host or buffer copies go now, as autograd's saved inputs do
    input_grads.emplace_back();   // the segment argument
    return input_grads;
  }
};

std::atomic<bool> warned_no_grad_inputs{false};

// A Checkpointer for one call: its contiguous buffer has one slot, whatever
// number_checkpoints says (no later segment would fill the others).
CheckpointOptions one_segment(CheckpointOptions options) {
  if (options.contiguous_memory_optimization) options.number_checkpoints = 1;
  return options;
}

}  // namespace

CheckpointOptions options_from_config(const config::ActivationCheckpointingConfig& c) {
  ZT_CHECK(!c.partition_activations, ConfigError,
           "activation_checkpointing.partition_activations splits each checkpoint over the ranks of a "
           "model-parallel group, and zerotrain has no model (tensor) parallelism; set it to false");
  CheckpointOptions o;
  o.cpu_checkpointing = c.cpu_checkpointing;
  o.contiguous_memory_optimization = c.contiguous_memory_optimization;
  o.number_checkpoints = c.number_checkpoints;
  o.synchronize_checkpoint_boundary = c.synchronize_checkpoint_boundary;
  o.profile = c.profile;
  return o;
}

Checkpointer::Checkpointer(CheckpointOptions options) {
  ZT_CHECK(!options.contiguous_memory_optimization || options.number_checkpoints.value_or(0) > 0, ConfigError,
           "activation_checkpointing.contiguous_memory_optimization needs number_checkpoints, the segments one "
           "forward pass checkpoints (its buffer has a slot for each): set it to the number of checkpointed "
           "layers, as DeepSpeed requires");
  state_ = std::make_shared<detail::CheckpointState>(std::move(options));
}

const CheckpointOptions& Checkpointer::options() const { return state_->options; }

CheckpointProfile Checkpointer::profile() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->profile;
}

std::vector<at::Tensor> Checkpointer::operator()(const SegmentFn& fn, const std::vector<at::Tensor>& inputs) const {
  ZT_CHECK(fn, UsageError, "zerotrain::activation::checkpoint was given an empty function");
  // Evaluation: nothing is kept for a backward, so there is nothing to save either.
  if (!at::GradMode::is_enabled()) return fn(inputs);
  bool any_requires_grad = false;
  for (const auto& t : inputs) any_requires_grad = any_requires_grad || (t.defined() && t.requires_grad());
  if (!any_requires_grad) {
    // With no input requiring grad, a checkpointed segment has no node in the graph, so
    // the parameters inside would get no gradient (PyTorch's use_reentrant=True drops them
    // with a warning). Running it plainly keeps their gradients; only the saving is lost.
    if (!warned_no_grad_inputs.exchange(true)) {
      ZT_LOG_WARN("activation checkpoint: a segment none of whose inputs requires grad runs without checkpointing "
                  "(its activations are kept), so that its parameters still get gradients; checkpoint segments "
                  "whose input comes from a trained layer (said once)");
    }
    return fn(inputs);
  }
  auto segment = c10::make_intrusive<Segment>();
  segment->fn = fn;
  segment->state = state_;
  return CheckpointFunction::apply(at::TensorList(inputs), c10::IValue::make_capsule(std::move(segment)));
}

at::Tensor Checkpointer::operator()(const TensorFn& fn, const at::Tensor& input) const {
  ZT_CHECK(fn, UsageError, "zerotrain::activation::checkpoint was given an empty function");
  SegmentFn segment = [fn](const std::vector<at::Tensor>& in) { return std::vector<at::Tensor>{fn(in[0])}; };
  return (*this)(segment, std::vector<at::Tensor>{input})[0];
}

std::vector<at::Tensor> checkpoint(const SegmentFn& fn, const std::vector<at::Tensor>& inputs,
                                   const CheckpointOptions& options) {
  return Checkpointer(one_segment(options))(fn, inputs);
}

at::Tensor checkpoint(const TensorFn& fn, const at::Tensor& input, const CheckpointOptions& options) {
  return Checkpointer(one_segment(options))(fn, input);
}

}  // namespace zerotrain::activation
