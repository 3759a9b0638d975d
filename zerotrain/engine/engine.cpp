// initialize() and the step half of the engine (the backward half is grad_sync.cpp).
#include "zerotrain/engine/engine.h"

#include <torch/nn/module.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>

#include <cmath>
#include <exception>
#include <utility>
#include <unordered_map>
#include <unordered_set>

#include "zerotrain/config/effective.h"
#include "zerotrain/config/resolve.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"
#include "zerotrain/cpu/malloc_policy.h"
#include "zerotrain/cpu/matmul_kernels.h"
#include "zerotrain/engine/engine_state.h"
#include "zerotrain/precision/from_config.h"
#include "zerotrain/stages/stage3/preshard.h"

namespace zerotrain {
namespace {

using engine::detail::EngineState;
using engine::detail::GroupState;

void check_optimizer_source(const Config& c, const config::StageTraits& stage, const InitOptions& options) {
  if (!options.optimizer) {
    ZT_CHECK(c.optimizer.has_value(), ConfigError,
             "the config has no \"optimizer\" block and no client optimizer was given; add one (e.g. "
             "{\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3}}) or pass InitOptions::optimizer");
    return;
  }
  ZT_CHECK(!c.optimizer.has_value(), ConfigError, "both the config's \"optimizer\" block and a client optimizer were "
           "given; keep one of them");
  ZT_CHECK(options.param_groups.empty(), UsageError, "InitOptions: give parameter groups through the client "
           "optimizer's own groups, not param_groups as well");
  const auto* o = options.optimizer.get();
  const bool zero_tested = dynamic_cast<const torch::optim::Adam*>(o) || dynamic_cast<const torch::optim::AdamW*>(o) ||
                           dynamic_cast<const torch::optim::Adagrad*>(o);
  ZT_CHECK(!stage.shards_optimizer || zero_tested || c.zero_allow_untested_optimizer, ConfigError,
           "the client optimizer is not one ZeRO was tested with (torch's Adam, AdamW, Adagrad); add "
           "\"zero_allow_untested_optimizer\": true to use it at stage ", stage.number,
           " (DeepSpeed requires the same)");
}

// The client optimizer's groups, as the engine's.
std::vector<ParamGroup> client_groups(torch::optim::Optimizer& optimizer) {
  std::vector<ParamGroup> groups;
  for (auto& g : optimizer.param_groups()) {
    groups.push_back({"group " + std::to_string(groups.size()), g.params(), g.options().get_lr(), std::nullopt});
  }
  return groups;
}

// The model's parameters by identity, for names in messages and checkpoints. A parameter
// registered twice (a head tied to its embedding) keeps its first name, as PyTorch's
// named_parameters() gives it.
std::unordered_map<const void*, std::string> parameter_names(torch::nn::Module& model) {
  std::unordered_map<const void*, std::string> names;
  for (const auto& item : model.named_parameters()) names.emplace(item.value().unsafeGetTensorImpl(), item.key());
  return names;
}

// Every parameter once, however often it is registered (a head tied to its embedding).
std::vector<ParamGroup> default_groups(torch::nn::Module& model) {
  ParamGroup group{"params", {}, std::nullopt, std::nullopt};
  std::unordered_set<const void*> seen;
  for (const auto& p : model.parameters()) {
    if (seen.insert(p.unsafeGetTensorImpl()).second) group.params.push_back(p);
  }
  return {group};
}

// A trainable parameter's name for messages: the model's, or its place in a group of the
// client's that holds a tensor the model does not register.
std::string param_name(const std::unordered_map<const void*, std::string>& names, const ParamGroup& spec,
                       const at::Tensor& p, size_t trainable_index) {
  auto it = names.find(p.unsafeGetTensorImpl());
  return it != names.end() ? it->second : spec.name + "[" + std::to_string(trainable_index) + "]";
}

// The one device every trained parameter is on, where the engine keeps everything else too
// (DeepSpeed's engine moves the module to its rank's accelerator; this one trains the
// parameters where the caller put them). The CPU and CUDA GPUs have the kernels and the
// backends (gloo, nccl); a model split over two devices would need copies in every
// collective and every step, so it is refused rather than trained slowly.
at::Device training_device(const std::vector<ParamGroup>& specs,
                           const std::unordered_map<const void*, std::string>& names) {
  std::optional<std::pair<std::string, at::Device>> first;
  for (const auto& spec : specs) {
    size_t trainable = 0;
    for (const auto& p : spec.params) {
      if (!p.requires_grad()) continue;
      const std::string name = param_name(names, spec, p, trainable++);
      const at::Device d = p.device();
      ZT_CHECK(d.is_cpu() || d.is_cuda(), NotSupported, "parameter ", name, " is on ", d,
               ": the engine trains parameters on the CPU or on a CUDA GPU only; move the model to one of them "
               "before initialize (model->to(torch::kCUDA) or model->to(torch::kCPU))");
      if (!first) first.emplace(name, d);
      ZT_CHECK(d == first->second, UsageError, "parameter ", first->first, " is on ", first->second,
               " but parameter ", name, " is on ", d, "; the engine trains a model on one device: move the whole "
               "model there before initialize (model->to(torch::Device(\"", first->second, "\")))");
    }
  }
  return first ? first->second : at::Device(at::kCPU);
}

GroupState make_group(const ParamGroup& spec, const std::unordered_map<const void*, std::string>& names,
                      EngineState& s) {
  std::vector<at::Tensor> trainable;
  std::vector<std::string> trainable_names;
  for (const auto& p : spec.params) {
    if (!p.requires_grad()) continue;   // frozen: left out of everything
    const std::string name = param_name(names, spec, p, trainable.size());
    ZT_CHECK(p.scalar_type() == s.precision.model, ConfigError, "parameter ", name, " is ", p.scalar_type(),
             " but the config trains in ", s.precision.model, "; enable the matching \"bf16\" or \"fp16\" block, "
             "or give the engine a float32 model (model->to(torch::kFloat))");
    trainable.push_back(p);
    trainable_names.push_back(name);
  }
  GroupState g;
  g.index = s.groups.size();
  g.name = spec.name;
  g.params = trainable;
  g.param_names = trainable_names;
  g.device = s.device;   // training_device checked every parameter is there
  g.hyper = s.optimizer ? s.optimizer->defaults() : optim::GroupHyper{};
  if (spec.lr) g.hyper.lr = *spec.lr;
  if (spec.weight_decay) g.hyper.weight_decay = *spec.weight_decay;
  s.stage->arrange(g, std::max<int64_t>(1, s.config.zero_optimization.reduce_bucket_size.value));
  s.stage->place(g);
  s.stage->allocate(g);
  return g;
}

}  // namespace

void EngineState::check_not_damaged() const {
  ZT_CHECK(damaged.empty(), UsageError, "the engine's weights cannot be trusted: ", damaged,
           "; load a checkpoint successfully before training or saving");
}

void EngineState::apply_schedule() {
  EngineState& s = *this;
  if (!s.schedule) return;
  const auto lrs = s.schedule->lrs();
  const auto betas = s.schedule->betas();
  for (size_t g = 0; g < s.groups.size(); ++g) {
    s.groups[g].hyper.lr = lrs[g];
    if (betas) s.groups[g].hyper.betas = *betas;
  }
}

namespace {

void client_step(EngineState& s, const std::vector<at::Tensor>& grads) {
  auto& client_groups = s.client_optimizer->param_groups();
  for (size_t i = 0; i < s.groups.size(); ++i) {
    GroupState& g = s.groups[i];
    g.client_param.mutable_grad() = grads[i].detach();
    if (s.schedule) client_groups[i].options().set_lr(g.hyper.lr);
  }
  s.client_optimizer->step();
  for (GroupState& g : s.groups) g.client_param.mutable_grad().reset();
}

void flat_step(EngineState& s, const std::vector<at::Tensor>& grads) {
  for (size_t i = 0; i < s.groups.size(); ++i) {
    GroupState& g = s.groups[i];
    s.optimizer->step(i, g.stepped_weights(), grads[i], g.hyper, s.stage->optimizer_segments(g));
  }
}

// DeepSpeed's unscale_and_clip_grads: one factor undoes the loss scale and clips to
// gradient_clipping; `norm` is of the unscaled gradients, and `scale` is the one backward
// used. (DeepSpeed divides by the scale after its update, so on a step where the scale
// doubles its gradients come out half size; we use the scale the gradients carry.)
double gradient_divisor(const EngineState& s, double norm, double scale) {
  double combined = scale;
  const double clip_to = s.config.gradient_clipping.value;
  if (clip_to > 0 && norm > 0) {
    const double clip = (norm + 1e-6) / clip_to;
    if (clip > 1) combined *= clip;
  }
  return combined;
}

// Each group's gradients in fp32, divided by `combined`, ready for the optimizer.
std::vector<at::Tensor> unscaled_fp32_gradients(EngineState& s, double combined) {
  std::vector<at::Tensor> grads;
  int64_t copies_nbytes = 0;
  for (GroupState& g : s.groups) {
    at::Tensor grad = s.stage->step_gradients(g);
    if (grad.scalar_type() != at::kFloat) {
      grad = grad.to(at::kFloat);
      copies_nbytes += static_cast<int64_t>(grad.nbytes());
    }
    if (combined != 1.0) grad.div_(combined);
    grads.push_back(grad);
  }
  s.meter.note_temporary(copies_nbytes);
  return grads;
}

// The update of every group from this step's gradients (`norm`: their unscaled global
// norm; `scale`: the loss scale they carry), and the new weights into every rank's model.
void optimizer_step(EngineState& s, double norm, double scale) {
  const double combined = gradient_divisor(s, norm, scale);
  if (s.offload) {
    // The offloaded step reads the gradients where they are and unscales them on the fly.
    try {
      s.offload->step(s.groups, *s.optimizer, *s.stage, combined);
    } catch (const IoError& e) {
      // Some sub-groups were stepped and written, others not: the weights and states no
      // longer belong to one step. Training stops here rather than go on from a mix.
      s.damaged = std::string("an offloaded optimizer step failed halfway (") + e.what() +
                  "), so the weights and optimizer states are a mix of two steps";
      throw;
    }
  } else if (s.client_optimizer) {
    client_step(s, unscaled_fp32_gradients(s, combined));
  } else {
    flat_step(s, unscaled_fp32_gradients(s, combined));
  }
  s.stage->publish_weights(s.groups);
}

// Floating-point parameters and buffers into the training dtype, as DeepSpeed's engine
// calls module.half() or module.bfloat16().
void cast_model(torch::nn::Module& model, at::ScalarType dtype) {
  at::NoGradGuard no_grad;
  auto cast = [dtype](at::Tensor t) {
    if (t.defined() && t.is_floating_point() && t.scalar_type() != dtype) t.set_data(t.detach().to(dtype));
  };
  for (auto& p : model.parameters()) cast(p);
  for (auto& b : model.buffers()) cast(b);
}

void zero_gradients(EngineState& s) {
  for (GroupState& g : s.groups) s.stage->zero_gradients(g);
}

}  // namespace

Engine initialize(std::shared_ptr<torch::nn::Module> model, Config config, InitOptions options) {
  ZT_CHECK(model != nullptr, UsageError, "initialize: the model is null");
  // Which kernels the model's matrix products run (MKL's AVX2 path on AMD CPUs unless
  // ZEROTRAIN_MATMUL=default); checked here so that a bad value fails before any work.
  const cpu::MatmulKernels matmul = cpu::select_matmul_kernels();
  ZT_LOG_DEBUG("matmul kernels: ", matmul.reason);
  // A step's large tensors kept for the next (ZEROTRAIN_MALLOC; cpu/malloc_policy.h).
  const cpu::MallocPolicy malloc_policy = cpu::apply_malloc_policy();
  ZT_LOG_DEBUG("malloc: ", malloc_policy.reason);
  // The communicator first: it reads the config's "comm" block before the config moves.
  // A model built under ZeroInit brings the communicator it was cut for.
  std::optional<comm::Communicator> communicator = options.comm;
  if (!communicator) communicator = stages::stage3::preshard_comm(*model);
  if (!communicator) communicator = comm::Communicator::init(comm::options_from_config(config));
  auto s = std::make_unique<EngineState>(model, std::move(config), std::move(*communicator));
  // Refuses what `config check` refuses (config/checks.cpp), on the resolved values.
  config::finalize(s->config, s->comm.world_size());
  const config::StageTraits traits = config::traits_of(static_cast<int>(s->config.zero_optimization.stage));
  s->accumulation_steps = s->config.gradient_accumulation_steps.value.value_or(1);
  s->overlap_comm = s->config.zero_optimization.effective_overlap_comm();
  s->ignore_unused_parameters = s->config.zero_optimization.ignore_unused_parameters;
  s->precision = precision::dtypes_from_config(s->config);
  const auto& offload_block = s->config.zero_optimization.offload_optimizer;
  const bool master_offloaded = offload_block && offload_block->enabled();
  s->stage = stages::make_stage(traits, {s->comm, s->precision, &s->meter, &s->config.zero_optimization,
                                         engine::detail::make_param_swap(s->config, traits, s->comm.rank(), *model),
                                         master_offloaded});
  if (s->config.fp16_enabled()) {
    s->scaler.emplace(precision::loss_scaler_options(s->config));
    s->watch.emplace(precision::overflow_watch_options(s->config));
  }
  stages::stage3::check_presharded(*model, traits, s->precision.model, s->comm);
  if (s->precision.half()) cast_model(*model, s->precision.model);
  check_optimizer_source(s->config, traits, options);
  if (options.optimizer) {
    s->client_optimizer = options.optimizer;
  } else {
    s->optimizer = optim::FlatOptimizer::from_config(*s->config.optimizer, traits.shards_optimizer);
  }

  s->stage->attach(*model);
  const auto names = parameter_names(*model);
  auto specs = s->client_optimizer ? client_groups(*s->client_optimizer)
               : options.param_groups.empty() ? default_groups(*model)
                                              : options.param_groups;
  s->device = training_device(specs, names);
  for (const auto& spec : specs) s->groups.push_back(make_group(spec, names, *s));
  s->stage->finish_setup();
  engine::detail::start_offload(*s);
  if (s->client_optimizer) {
    // The client steps the engine's shard of each group: a leaf alias of it, so that its
    // in-place update (under torch's NoGradGuard) lands in the engine's buffer.
    for (size_t i = 0; i < s->groups.size(); ++i) {
      GroupState& g = s->groups[i];
      g.client_param = g.stepped_weights().detach().requires_grad_(true);
      s->client_optimizer->param_groups()[i].params() = {g.client_param};
    }
  }
  if (s->config.scheduler) {
    std::vector<double> base_lrs;
    for (const auto& g : s->groups) base_lrs.push_back(g.hyper.lr);
    s->schedule = optim::LrSchedule::from_config(*s->config.scheduler, base_lrs);
    s->apply_schedule();
  }
  s->install_hooks();
  if (s->comm.rank() == 0) {
    const auto& p = s->precision;
    ZT_LOG_INFO("engine: ZeRO stage ", traits.number, ", world size ", s->comm.world_size(), ", ",
                s->optimizer ? s->optimizer->name() : "client optimizer", ", gradient accumulation ",
                s->accumulation_steps, ", ", dtype_name(p.model), " (gradients: reduced in ", dtype_name(p.comm),
                ", accumulated in ", dtype_name(p.accum), ")",
                s->scaler ? ", loss scale " + std::to_string(static_cast<int64_t>(s->scaler->scale())) : std::string());
    // DeepSpeed logs its whole configuration at start-up (130 lines); this engine logs what
    // differs from the defaults, by source, and the whole table at debug (and the Trainer
    // writes it to <output_dir>/effective_config.json).
    ZT_LOG_INFO("config (values that are not defaults; all of them: --log_level debug or `zerotrain config check "
                "--effective`):\n", config::non_default_block(s->config));
    ZT_LOG_DEBUG("effective config (value [source]):\n", config::effective_table(s->config));
    if (s->offload) ZT_LOG_INFO("engine: ", s->offload->describe());
  }
  return Engine(std::move(s));
}

Engine::Engine(std::unique_ptr<engine::detail::EngineState> state) : state_(std::move(state)) {}
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;
Engine::~Engine() = default;

void Engine::backward(const at::Tensor& loss, bool scale_wrt_gas) {
  ZT_CHECK(loss.defined() && loss.numel() == 1, UsageError, "engine.backward: the loss must be a scalar tensor");
  state_->check_not_damaged();
  state_->begin_backward();
  at::Tensor scaled = loss;
  // DeepSpeed's loss_scaler.backward: (loss.float() * scale).backward().
  if (state_->scaler) scaled = loss.to(at::kFloat) * state_->scaler->scale();
  if (scale_wrt_gas && state_->accumulation_steps > 1) {
    scaled = scaled / static_cast<double>(state_->accumulation_steps);
  }
  scaled.backward();
  state_->end_backward();
}

void Engine::step() {
  EngineState& s = *state_;
  s.check_not_damaged();
  if (!s.at_boundary()) {
    ++s.micro_steps;
    return;
  }
  ZT_CHECK(s.traits().reduces_every_backward || s.boundary_reduced, UsageError,
           "engine.step() at the accumulation boundary, but that micro-step's backward ran inside no_sync(), so "
           "the gradients were never averaged over the ranks; leave the last micro-step of each step outside no_sync()");
  s.wait_reductions();
  const engine::detail::GradCheck check = s.check_gradients();
  const double scale = s.loss_scale();   // the scale this step's gradients carry
  const double norm = std::sqrt(check.sum_squares) / scale;
  s.stop_if_not_finite(norm);
  // DeepSpeed reports -1 for a norm that is inf or nan; a skipped step keeps the last one.
  if (!check.overflow) s.global_grad_norm = std::isfinite(norm) ? norm : -1.0;
  s.update_loss_scale(check);
  if (check.overflow) {
    ++s.skipped_steps;   // DeepSpeed: no update, the schedule not stepped; the step counts
  } else {
    optimizer_step(s, *s.global_grad_norm, scale);
    if (s.schedule) {
      s.schedule->step();
      s.apply_schedule();
    }
  }
  zero_gradients(s);
  ++s.global_steps;
  s.global_samples += s.config.train_batch_size.value.value_or(0);
  // The count restarts at every boundary, so a window the caller cut short (a forced
  // boundary) leaves the next one whole, and checkpoints see a completed accumulation.
  s.micro_steps = s.global_steps * s.accumulation_steps;
  // A save written in the background is published at the first step after every rank's
  // file is done (every rank steps, so every rank polls alike).
  s.finish_pending_save(false);
}

bool Engine::is_gradient_accumulation_boundary() const { return state_->at_boundary(); }

void Engine::set_gradient_accumulation_boundary(std::optional<bool> is_boundary) {
  state_->forced_boundary = is_boundary;
}

void Engine::zero_grad() {
  for (auto& g : state_->groups) {
    for (auto& p : g.params) p.mutable_grad().reset();
  }
}

void Engine::train() { state_->model->train(true); }
void Engine::eval() { state_->model->train(false); }

std::vector<double> Engine::get_lr() const {
  std::vector<double> lrs;
  for (const auto& g : state_->groups) lrs.push_back(g.hyper.lr);
  return lrs;
}
void Engine::set_lr(const std::vector<double>& lrs) {
  ZT_CHECK(!state_->schedule, UsageError, "the config's \"scheduler\" block sets the learning rates; remove it to "
           "set them from a client schedule");
  ZT_CHECK(lrs.size() == state_->groups.size(), UsageError, "set_lr: ", lrs.size(), " learning rates for ",
           state_->groups.size(), " parameter groups; give one per group");
  for (size_t g = 0; g < lrs.size(); ++g) state_->groups[g].hyper.lr = lrs[g];
}

int64_t Engine::global_steps() const { return state_->global_steps; }
int64_t Engine::global_samples() const { return state_->global_samples; }
int64_t Engine::skipped_steps() const { return state_->skipped_steps; }
double Engine::loss_scale() const { return state_->loss_scale(); }
at::ScalarType Engine::model_dtype() const { return state_->precision.model; }
at::Device Engine::device() const { return state_->device; }
at::ScalarType Engine::communication_data_type() const { return state_->precision.comm; }
at::ScalarType Engine::grad_accum_dtype() const { return state_->precision.accum; }

at::Tensor Engine::cast_inputs(const at::Tensor& input) const {
  return state_->precision.auto_cast && input.is_floating_point() ? input.to(at::kHalf) : input;
}
int64_t Engine::micro_steps() const { return state_->micro_steps; }
std::optional<double> Engine::get_global_grad_norm() const { return state_->global_grad_norm; }
const Config& Engine::config() const { return state_->config; }
comm::Communicator& Engine::comm() { return state_->comm; }

ModelStateBytes Engine::model_state_bytes() const {
  ModelStateBytes bytes;
  auto nbytes = [](const at::Tensor& t) { return t.defined() ? static_cast<int64_t>(t.nbytes()) : int64_t{0}; };
  for (const auto& g : state_->groups) {
    bytes.params += state_->stage->param_nbytes(g);
    bytes.grads += nbytes(g.grad_full) + nbytes(g.grad_shard);
    bytes.master += nbytes(g.master);
  }
  // A client optimizer's state is opaque (torch::optim's per-parameter state objects): not counted.
  bytes.optimizer = state_->optimizer ? state_->optimizer->state_nbytes() : 0;
  bytes.buffers = state_->meter.peak_nbytes();
  bytes.gathered_peak = state_->stage->gathered_peak_nbytes();
  for (const auto& b : state_->model->buffers()) bytes.buffers += nbytes(b);
  // Offload to NVMe: master and moments are on disk between steps (host memory offload keeps
  // them in `master` and `optimizer`, counted above); its sub-group buffers are in memory.
  if (state_->offload) {
    bytes.disk += state_->offload->disk_nbytes();
    if (state_->offload->disk_nbytes() > 0) bytes.buffers += state_->offload->host_nbytes();
  }
  bytes.disk += state_->stage->param_disk_nbytes();
  return bytes;
}

GatheredParameters::GatheredParameters(Engine& engine, std::vector<at::Tensor> params, std::optional<int> modifier_rank)
    : state_(engine.state_.get()), modifier_rank_(modifier_rank) {
  ZT_CHECK(!modifier_rank || (*modifier_rank >= 0 && *modifier_rank < state_->comm.world_size()), UsageError,
           "GatheredParameters: modifier_rank ", modifier_rank.value_or(-1), " is not a rank of this world of ",
           state_->comm.world_size());
  token_ = state_->stage->begin_user_gather(state_->groups, params);
}

void GatheredParameters::close() {
  if (!std::exchange(open_, false)) return;
  at::NoGradGuard no_grad;
  // A modifier's values become the master weights too: with offload, the master is brought in.
  if (modifier_rank_) {
    state_->with_states_in_memory([&] { state_->stage->end_user_gather(state_->groups, token_, modifier_rank_); });
  } else {
    state_->stage->end_user_gather(state_->groups, token_, modifier_rank_);
  }
}

GatheredParameters::~GatheredParameters() noexcept(false) {
  if (!open_) return;
  if (std::uncaught_exceptions() > 0) {
    // Unwinding already: the scope's own collectives would only wait for ranks that are
    // unwinding too; the error in flight is the one to report.
    open_ = false;
    return;
  }
  close();
}

namespace {

// A copy in host memory, as DeepSpeed's consolidated state dict moves each gathered tensor to
// the CPU: a second whole model on the GPU, next to the training states, may not fit there.
at::Tensor host_copy(const at::Tensor& t) {
  at::Tensor d = t.detach();
  return d.is_cpu() ? d.clone() : d.to(at::kCPU);
}

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> Engine::consolidated_16bit_state_dict() {
  std::vector<std::pair<std::string, at::Tensor>> out;
  const bool keep = state_->comm.rank() == 0;
  std::unordered_set<const void*> seen;
  for (const auto& item : state_->model->named_parameters()) {
    if (!seen.insert(item.value().unsafeGetTensorImpl()).second) continue;
    GatheredParameters full(*this, {item.value()});
    if (keep) out.emplace_back(item.key(), host_copy(item.value()));
    full.close();
  }
  if (keep) {
    for (const auto& item : state_->model->named_buffers()) out.emplace_back(item.key(), host_copy(item.value()));
  }
  return out;
}

Engine::NoSync::NoSync(engine::detail::EngineState* state) : state_(state) {
  ZT_CHECK(!state_->traits().reduces_every_backward, UsageError, "no_sync() cannot be used with ZeRO stage ",
           state_->traits().number, ": stage ", state_->traits().number,
           " partitions gradients during every backward (DeepSpeed refuses it too)");
  ++state_->no_sync_depth;
}
Engine::NoSync::~NoSync() { --state_->no_sync_depth; }
Engine::NoSync Engine::no_sync() { return NoSync(state_.get()); }

}  // namespace zerotrain
