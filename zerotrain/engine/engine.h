// zerotrain::initialize and the Engine: DeepSpeed's training loop for any LibTorch module,
// data-parallel with ZeRO stages 0, 1, 2 and 3, in fp32, bf16 or fp16 (docs/engine.md,
// docs/stage3.md, docs/precision.md).
//
//   auto engine = zerotrain::initialize(model, zerotrain::Config::from_file("ds_config.json"));
//   for (auto& batch : loader) {
//     auto loss = loss_fn(model->forward(batch.data), batch.target);
//     engine.backward(loss);   // scales by 1/accumulation; buckets reduce during backward
//     engine.step();           // at the accumulation boundary: clip, optimizer, scheduler
//   }
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/config/config.h"
#include "zerotrain/precision/dtypes.h"   // dtype_name
#include "zerotrain/stages/stage3/zero_init.h"

namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}

namespace zerotrain {

namespace engine::detail {
struct EngineState;
}

// A named parameter group with its own hyper-parameters (unset: the optimizer's).
struct ParamGroup {
  std::string name;
  std::vector<at::Tensor> params;
  std::optional<double> lr;
  std::optional<double> weight_decay;
};

struct InitOptions {
  // The communicator to use; unset: Communicator::init with the config's "comm" block.
  std::optional<comm::Communicator> comm;
  // Parameter groups; unset: one group of every trainable parameter of the model.
  // Parameters with requires_grad false are left out of everything (frozen).
  std::vector<ParamGroup> param_groups;
  // A client optimizer built over the model's parameters, as deepspeed.initialize accepts
  // one (then the config has no "optimizer" block). Its parameter groups become the
  // engine's groups, and it steps the engine's flat fp32 shard of each. At ZeRO stages 1-2
  // anything but torch's Adam, AdamW or Adagrad needs "zero_allow_untested_optimizer".
  std::shared_ptr<torch::optim::Optimizer> optimizer;
};

// The bytes the engine holds for the model's training state on this rank.
struct ModelStateBytes {
  int64_t params = 0;        // the flat parameter buffers (stage 3: the resident unit, and the 16-bit shard)
  int64_t grads = 0;         // gradient buffers: full (stages 0, 1) or this rank's shard (stages 1-3)
  int64_t optimizer = 0;     // optimizer states (moments, momentum buffers, ...)
  int64_t master = 0;        // fp32 master weights: this rank's shard (stages 1-3), all (stage 0, bf16/fp16)
  int64_t buffers = 0;       // gradient bucket staging buffers at their peak, and module buffers
  // Stage 3: the most bytes of full parameters of units (not the resident one) gathered at
  // once so far. Transient, so not in total().
  int64_t gathered_peak = 0;
  // NVMe offload (docs/offload.md): the bytes of this rank's swap files, not in memory, so
  // not in total(). Its buffers in memory are in `buffers`.
  int64_t disk = 0;
  int64_t total() const { return params + grads + optimizer + master + buffers; }
};

// What Engine::load_checkpoint restores besides the weights (DeepSpeed's arguments).
struct CheckpointLoadOptions {
  bool load_optimizer_states = true;     // optimizer moments and step counts
  bool load_lr_scheduler_states = true;  // the schedule's iteration
  bool load_module_only = false;         // the weights (and buffers) only: no optimizer, schedule or counters
  bool load_module_strict = true;        // every trainable parameter of the model must be in the checkpoint
};

// How Engine::save_16bit_model writes the model (DeepSpeed's arguments, and HF's sharding).
struct ModelSaveOptions {
  bool exclude_frozen_parameters = false;      // leave out parameters with requires_grad false
  // A file holds tensors up to this many bytes; past it the model is written as Hugging
  // Face's shards plus an index (huggingface_hub's split, "5GB" as it counts).
  int64_t max_shard_bytes = 5'000'000'000;
  // The folder's other files (Hugging Face's config.json), plain name -> bytes, as the caller
  // made them on rank 0: rank 0 writes each whole after the weights, before the index.
  std::vector<std::pair<std::string, std::string>> extra_files;
  // What went wrong making them, on rank 0: the save then fails on every rank, with this
  // message, before anything is written.
  std::string caller_error;
  // The name each tensor is saved under, from the name the module registers it by (unset:
  // that name). A model built from a Hugging Face folder maps its names back to the
  // folder's, without the ".module" of its ZeRO-3 units.
  std::function<std::string(const std::string&)> tensor_name;
  // At stage 3, gather and save even when "stage3_gather_16bit_weights_on_model_save" is
  // false: the caller asked for the model folder explicitly (zerotrain train's HF saves).
  bool gather_at_stage3 = false;
};

struct LoadedCheckpoint {
  std::string path;            // the tag directory loaded
  config::Json client_state;   // what save_checkpoint was given
};

class Engine {
 public:
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;
  ~Engine();

  // Backward of loss / gradient_accumulation_steps (times the loss scale in fp16); gradient
  // buckets are reduced as they fill. Call step() after every backward. With
  // `scale_wrt_gas` false the loss is taken as already divided (HF's Trainer divides it by
  // the micro-batches of the window it is in, which the last window of an epoch may cut short).
  void backward(const at::Tensor& loss, bool scale_wrt_gas = true);
  // Counts the micro-step; at the accumulation boundary: waits for the reductions, clips to
  // gradient_clipping (global L2 norm), steps the optimizer and the schedule. In fp16 a step
  // whose gradients overflowed on any rank is skipped instead (skipped_steps()), and
  // NumericsError stops training when the loss scale cannot recover (docs/precision.md).
  void step();
  bool is_gradient_accumulation_boundary() const;
  // DeepSpeed's set_gradient_accumulation_boundary: the caller says whether the next
  // micro-step ends the accumulation (HF's Trainer steps at the end of an epoch whatever the
  // count); nullopt goes back to counting micro-steps. A forced boundary restarts the count.
  void set_gradient_accumulation_boundary(std::optional<bool> is_boundary);
  void zero_grad();
  void train();
  void eval();

  std::vector<double> get_lr() const;   // each group's
  // Each group's learning rate from now on, for a schedule the caller runs itself (a Python
  // torch.optim.lr_scheduler); UsageError when the config has a "scheduler" (it sets them).
  void set_lr(const std::vector<double>& lrs);
  int64_t global_steps() const;
  int64_t global_samples() const;
  int64_t skipped_steps() const;
  int64_t micro_steps() const;
  // fp16: the current loss scale; 1 otherwise (DeepSpeed's engine.loss_scale()).
  double loss_scale() const;
  // The dtypes of training (docs/precision.md): parameters and activations; gradients on the
  // wire (communication_data_type); gradients summed over micro-steps (grad_accum_dtype).
  at::ScalarType model_dtype() const;
  // Where the trained parameters live (every one on this device; initialize refuses a model
  // split over two), and so every buffer and state of the engine: a batch goes here too.
  // The CPU for a model without trainable parameters.
  at::Device device() const;
  at::ScalarType communication_data_type() const;
  at::ScalarType grad_accum_dtype() const;
  // With fp16.auto_cast, a floating-point input cast to fp16 (what DeepSpeed's forward does to
  // its inputs; a C++ module has no forward hook, so call it on the model's inputs). Other
  // inputs, and every input without auto_cast, come back unchanged.
  at::Tensor cast_inputs(const at::Tensor& input) const;
  // The L2 norm of all gradients over all ranks at the last step, before clipping.
  std::optional<double> get_global_grad_norm() const;
  ModelStateBytes model_state_bytes() const;

  // While alive, backward() accumulates locally and reduces nothing (DDP's no_sync).
  // Stage 0 and 1 only: stages 2 and 3 partition gradients during backward (DeepSpeed asserts too).
  class NoSync {
   public:
    explicit NoSync(engine::detail::EngineState* state);
    NoSync(const NoSync&) = delete;
    ~NoSync();

   private:
    engine::detail::EngineState* state_;
  };
  NoSync no_sync();

  const Config& config() const;
  comm::Communicator& comm();

  // The model's full parameters (and buffers), by name in the model's dtype, on rank 0, as
  // copies in host memory whatever the engine's device; empty elsewhere. Every rank must call it. At stage 3 the parameters are gathered one at
  // a time, so no rank holds more than one unit beyond its shard (what DeepSpeed saves with
  // stage3_gather_16bit_weights_on_model_save).
  std::vector<std::pair<std::string, at::Tensor>> consolidated_16bit_state_dict();

  // Checkpoints (docs/checkpoints.md). Every rank must call these, with the same arguments.
  //
  // Saves `<save_dir>/<tag>/` (tag empty: "global_step<N>"): a manifest and one safetensors
  // file per rank with its fragments of the fp32 master weights and optimizer states, the
  // schedule, the loss scaler, the counters, each rank's RNG state and `client_state`. The
  // tag appears complete or not at all, and `<save_dir>/latest` names it (with
  // `save_latest`) only once every rank has finished; a failure on any rank throws on every
  // rank and leaves the previous checkpoint as it was. Call it after step(), at an
  // accumulation boundary.
  //
  // With checkpoint.async_save, it returns once this rank's state is copied; a background
  // thread writes the file, and the checkpoint is published (and `latest` moved) at the
  // first step() after every rank's file is written, or by wait_for_checkpoint(). A second
  // save, a load and wait_for_checkpoint() wait for the one in flight.
  void save_checkpoint(const std::string& save_dir, const std::string& tag = "",
                       const config::Json& client_state = config::Json::object(), bool save_latest = true);
  // Waits for the checkpoint being written in the background, if any, and publishes it
  // (collective). Call it before the program ends: a save never published leaves `latest`
  // naming the previous checkpoint. The path of the checkpoint it published, if any.
  std::optional<std::string> wait_for_checkpoint();
  // The tag directory being written in the background, if any.
  std::optional<std::string> checkpoint_in_flight() const;
  // Loads `<load_dir>/<tag>` (tag empty: the one `latest` names) at any world size, stage and
  // dtype: each rank reads the fragments of what it holds. Nothing changes unless every rank
  // read its part. nullopt (and a warning) when there is no `latest`, as DeepSpeed returns
  // (None, None).
  std::optional<LoadedCheckpoint> load_checkpoint(const std::string& load_dir, const std::string& tag = "",
                                                  const CheckpointLoadOptions& options = {});
  // DeepSpeed's save_16bit_model, as Hugging Face's model folder: rank 0 writes the model's
  // parameters (each once, under its first name: a tied head is its embedding) and
  // persistent buffers in the model dtype to `<save_dir>/<filename>` as safetensors, or past
  // options.max_shard_bytes as shards `<stem>-00001-of-0000N.safetensors` with
  // `<filename>.index.json` (checkpoint/sharded_writer.h). It streams: one tensor at a time
  // is gathered (stage 3: the parameters of one module at a time, on every rank) and written,
  // so no rank holds the whole model. Files appear whole or not at all, the index last; an
  // error on rank 0 throws on every rank and takes the weights it wrote. At stage 3 only with
  // "stage3_gather_16bit_weights_on_model_save" (returns false and logs otherwise).
  bool save_16bit_model(const std::string& save_dir, const std::string& filename = "model.safetensors",
                        const ModelSaveOptions& options = {});

 private:
  friend class GatheredParameters;
  friend Engine initialize(std::shared_ptr<torch::nn::Module>, Config, InitOptions);
  explicit Engine(std::unique_ptr<engine::detail::EngineState> state);
  std::unique_ptr<engine::detail::EngineState> state_;
};

// DeepSpeed's zero.GatheredParameters: while alive, the given parameters (every parameter of
// the model when none are given) hold their full values on every rank, also at ZeRO stage 3
// outside a forward. With `modifier_rank`, what that rank writes into them becomes every
// rank's, master weights included, when the scope ends (init, weight tying, surgery). The
// constructor and close() are collectives: every rank makes the same scope.
//
//   { zerotrain::GatheredParameters full(engine, {model->fc->weight}, /*modifier_rank=*/0);
//     if (rank == 0) model->fc->weight.normal_(); }
class GatheredParameters {
 public:
  explicit GatheredParameters(Engine& engine, std::vector<at::Tensor> params = {},
                              std::optional<int> modifier_rank = std::nullopt);
  GatheredParameters(const GatheredParameters&) = delete;
  GatheredParameters& operator=(const GatheredParameters&) = delete;
  // Ends the scope (and throws its errors); the destructor calls it when it was not called.
  void close();
  ~GatheredParameters() noexcept(false);

 private:
  engine::detail::EngineState* state_;
  std::vector<int> token_;
  std::optional<int> modifier_rank_;
  bool open_ = true;
};

// DeepSpeed's deepspeed.initialize: takes the model (its parameters become views of the
// engine's flat buffers), resolves and checks the config at this world size, and builds
// the optimizer and schedule it describes. Every rank must call it.
Engine initialize(std::shared_ptr<torch::nn::Module> model, Config config, InitOptions options = {});

}  // namespace zerotrain
