// The Trainer's setup: the config resolved as HF's Trainer resolves it, the model built
// (cut across ranks at stage 3), the engine, and what the run reports.
#include "zerotrain/trainer/trainer.h"

#include <sys/resource.h>
#include <unistd.h>

#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>

#include "zerotrain/activation/checkpoint.h"
#include "zerotrain/checkpoint/locate.h"
#include "zerotrain/comm/rendezvous/rendezvous.h"
#include "zerotrain/comm/report.h"
#include "zerotrain/config/resolve.h"
#include "zerotrain/config/stage_traits.h"
#include "zerotrain/config/trainer_blocks.h"
#include "zerotrain/core/cpu_features.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"
#include "zerotrain/trainer/checkpoint_folders.h"
#include "zerotrain/trainer/device.h"
#include "zerotrain/trainer/memory_check.h"
#include "zerotrain/trainer/trainer_config.h"
#include "zerotrain/trainer/trainer_impl.h"
#include "zerotrain/trainer/training_plan.h"

namespace zerotrain {
namespace trainer {

int64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

double process_age_s() {
  // Field 22 of /proc/self/stat is the start time in clock ticks since boot; /proc/uptime's
  // first number is now, in seconds since boot. The command name (field 2) may hold spaces,
  // so the fields are counted after its closing parenthesis.
  std::ifstream stat("/proc/self/stat"), uptime("/proc/uptime");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  double now_s = 0;
  const size_t close = text.rfind(')');
  if (!(uptime >> now_s) || close == std::string::npos) return -1;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && (fields >> field); ++i) {
    if (i == 22) return now_s - std::stod(field) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  return -1;
}

std::vector<int64_t> per_rank(comm::Communicator& comm, int64_t value) {
  auto all = torch::empty({comm.world_size()}, torch::kLong);
  comm.all_gather(torch::full({1}, value, torch::kLong), all).wait();
  return std::vector<int64_t>(all.data_ptr<int64_t>(), all.data_ptr<int64_t>() + comm.world_size());
}

double mean_over_ranks(comm::Communicator& comm, double value) {
  auto t = torch::full({1}, value, torch::kDouble);
  comm.all_reduce(t, comm::ReduceOp::kAvg).wait();
  return t.item<double>();
}

}  // namespace trainer

namespace {

namespace fs = std::filesystem;

std::mutex& seed_and_build_mutex() {
  static std::mutex m;
  return m;
}

// --bf16 when this CPU computes bf16 natively, unless a flag or the config already decide.
// Returns the line the start-up log prints.
std::string choose_precision(TrainingArguments& args, const Config& config) {
  if (args.bf16 || args.fp16) return "";
  const bool config_decides = config.source_of("bf16.enabled") == config::Source::kFile ||
                              config.source_of("fp16.enabled") == config::Source::kFile;
  const auto support = cpu::bf16_support();
  if (config_decides && !config.bf16.enabled.is_auto && !config.fp16.enabled.is_auto) {
    return "precision: as the config sets it (bf16 native on this CPU: " + std::string(support.native ? "yes" : "no") + ")";
  }
  args.bf16 = support.native;
  return std::string("precision: ") + (support.native ? "bf16" : "fp32") + ", because " + support.reason;
}

}  // namespace

Trainer::Trainer(TrainingArguments args, ModelSpec spec, TrainerData data, TrainerOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  check(args);
  ZT_CHECK(spec.build != nullptr, UsageError, "Trainer: the ModelSpec has no build function");
  ZT_CHECK(data.train != nullptr, UsageError, "Trainer: no training dataset");
  ZT_CHECK(data.eval != nullptr || args.eval_strategy == IntervalStrategy::kNo, UsageError, "--eval_strategy ",
           to_string(args.eval_strategy), " needs an evaluation dataset");
  // The checkpoint to resume from, found before anything is built: a wrong path costs nothing.
  s.resume_from = trainer::checkpoint_folders::resolve_resume(args.resume_from_checkpoint, args.output_dir);
  s.config = trainer::trainer_config(args);
  // The device first: a job on GPUs talks over NCCL unless the config or the environment
  // names a backend (DeepSpeed's default too); ranks sharing one GPU (--device cuda:N) cannot.
  const auto where = comm::rendezvous_from_env();
  auto comm_options = comm::options_from_config(s.config);
  const auto device = trainer::choose_device({.flag = args.device,
                                              .local_rank = where.local_rank,
                                              .local_world_size = where.local_world_size,
                                              .nccl = comm_options.backend == comm::BackendKind::kNccl});
  if (device.device.is_cuda() && comm_options.backend == comm::BackendKind::kAuto && where.world_size > 1 &&
      !device.shares_gpu && !comm::nccl_version().empty()) {
    comm_options.backend = comm::BackendKind::kNccl;
  }
  s.device = device.device;
  trainer::make_current(s.device);
  s.comm = options.comm ? *options.comm : comm::Communicator::init(where, comm_options);
  const std::string precision = options.bf16_if_native ? choose_precision(args, s.config) : "";
  config::add_trainer_blocks(s.config, args.lr_scheduler_type);

  const trainer::TrainingPlan plan = trainer::plan_training(args, data.train->size(), s.world_size());
  s.state.steps_per_epoch = plan.steps_per_epoch;
  s.state.max_steps = plan.max_steps;
  s.state.num_train_epochs = plan.num_train_epochs;
  config::resolve_auto(s.config, to_trainer_args(args, s.world_size(), spec.hidden_size, s.state.max_steps));

  s.baseline_rss_bytes = trainer::peak_rss_bytes();
  if (options.check_memory && spec.shape) {
    trainer::check_memory_fits(s.config, *spec.shape, *s.comm,
                               {.used_bytes = s.baseline_rss_bytes, .gradient_checkpointing = args.gradient_checkpointing});
  }
  {
    // At stage 3 each rank keeps 1/N of every unit as it is built, as HF's Trainer builds
    // the model under DeepSpeed's zero.Init: the model is never whole on any rank.
    std::optional<ZeroInit> zero_init;
    std::unique_lock<std::mutex> seeding(seed_and_build_mutex(), std::defer_lock);
    if (config::traits_of(static_cast<int>(s.config.zero_optimization.stage)).shards_parameters) {
      zero_init.emplace(s.config, *s.comm, s.device);
    } else {
      // Ranks that are threads of one process (the in-process backend) share LibTorch's
      // generator: one rank seeding it while another draws its initial weights would change
      // them. Each seeds and builds in turn, as processes would. (Under ZeroInit the build
      // runs collectives, so it cannot be serialised; its units come from rank 0's draws.)
      seeding.lock();
    }
    torch::manual_seed(static_cast<uint64_t>(args.seed));
    s.model = spec.build();
  }
  ZT_CHECK(s.model != nullptr, UsageError, "Trainer: the ModelSpec's build returned no model");
  ZT_CHECK(args.save_hf_steps == 0 || s.model->hf_export().has_value(), UsageError, "--save_hf_steps ",
           args.save_hf_steps, ": ", s.model->describe(), " was not built from a Hugging Face folder, so there is "
           "no folder to write; use --model hf:DIR, or --save_steps for checkpoints");
  // Built on the CPU (the seeded draws are the CPU generator's, so a GPU run starts from the
  // same weights as a CPU run), then moved; under ZeroInit the kept shards are already there.
  if (!s.device.is_cpu()) s.model->module()->to(s.device);
  if (!spec.hidden_size && s.model->hidden_size() > 0) {
    // The bucket sizes' "auto" from the built model, as HF reads model.config.hidden_size.
    config::resolve_auto(s.config, to_trainer_args(args, s.world_size(), s.model->hidden_size(), s.state.max_steps));
  }
  if (args.gradient_checkpointing) {
    s.model->enable_gradient_checkpointing(activation::options_from_config(s.config.activation_checkpointing));
  }
  s.engine = std::make_unique<Engine>(initialize(s.model->module(), s.config, {.comm = *s.comm}));
  const Config& c = s.engine->config();
  s.micro_batch = c.train_micro_batch_size_per_gpu.value.value_or(1);
  s.accumulation = c.gradient_accumulation_steps.value.value_or(1);
  s.global_batch = c.train_batch_size.value.value_or(s.micro_batch);
  s.leader = checkpoint::leads_save_directory(c.checkpoint.use_node_local_storage, s.comm->rank());
  // --save_steps 0 with the steps strategy saves nothing, as before HF's strategies existed.
  s.saves = !args.output_dir.empty() && args.save_strategy != IntervalStrategy::kNo &&
            !(args.save_strategy == IntervalStrategy::kSteps && args.save_steps == 0);
  if (s.saves) s.prepare_output_dir(args);
  if (s.saves && s.is_rank0()) {
    // Beside the checkpoints it made. Not worth a run: a disk that refuses it is reported,
    // and the checkpoints' own save says what it means for them.
    try {
      trainer::write_effective_config(c, args.output_dir);
    } catch (const IoError& e) {
      ZT_LOG_WARN("the effective config was not written (", e.message(),
                  "); training goes on (the same table: --log_level debug)");
    }
  }
  s.log = std::make_unique<trainer::RunLog>(args, c,
                                           trainer::RunLogOptions{.leader = s.is_rank0(),
                                                                  .max_steps = s.state.max_steps,
                                                                  .steps_per_epoch = s.state.steps_per_epoch,
                                                                  .metrics_file = options.metrics_file});
  if (s.is_rank0()) {
    std::ostringstream line;
    line << "zerotrain train: " << s.model->describe() << ", " << dtype_name(s.engine->model_dtype()) << ", ZeRO stage "
         << c.zero_optimization.stage << ", world size " << s.world_size() << ", global batch " << s.global_batch << " ("
         << s.micro_batch << " x " << s.accumulation << " x " << s.world_size() << "), " << s.state.steps_per_epoch
         << " steps per epoch, " << s.state.max_steps << " steps";
    s.log->say(line.str());
    s.log->say("data: " + data.train->info().description +
               (data.eval ? "; evaluation: " + data.eval->info().description : ""));
    if (!precision.empty()) s.log->say(precision);
    s.log->say("device: " + device.reason);
  }
  s.args = std::move(args);
  s.options = std::move(options);
  s.data = std::move(data);
  if (s.args.early_stopping_patience > 0) {
    s.callbacks.push_back(
        std::make_shared<EarlyStoppingCallback>(s.args.early_stopping_patience, s.args.early_stopping_threshold));
  }
}

Trainer::~Trainer() = default;

void Trainer::add_callback(std::shared_ptr<TrainerCallback> callback) { impl_->callbacks.push_back(std::move(callback)); }
TrainOutput Trainer::train() { return impl_->train(); }
Metrics Trainer::evaluate() { return impl_->evaluate(); }
std::string Trainer::save_checkpoint() {
  std::string dir = impl_->save();
  impl_->finish_save();   // a caller of the API gets a published checkpoint, async_save or not
  return dir;
}
const TrainerState& Trainer::state() const { return impl_->state; }
bool Trainer::is_world_process_zero() const { return impl_->is_rank0(); }
const TrainingArguments& Trainer::args() const { return impl_->args; }
Engine& Trainer::engine() { return *impl_->engine; }
models::Model& Trainer::model() { return *impl_->model; }

}  // namespace zerotrain
