// `zerotrain train`: the one-line way to train a built-in model with a DeepSpeed config,
// under `zerotrain launch` for several ranks. Flags follow HF's TrainingArguments; "auto"
// values in the config are filled from them exactly as HF's Trainer does. With
// --metrics_file, rank 0 writes one JSON object per logged step (DESIGN §1.3). With
// --output_dir and --save_steps it saves HF's checkpoint-<step> folders, and
// --resume_from_checkpoint continues from one at any world size (tools/train_checkpoints.h).
#include <sys/resource.h>

#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "tools/commands.h"
#include "tools/train_checkpoints.h"
#include "zerotrain/checkpoint/locate.h"
#include "zerotrain/config/resolve.h"
#include "zerotrain/core/env.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"
#include "zerotrain/core/output_file.h"
#include "zerotrain/data/synthetic.h"
#include "zerotrain/engine/engine.h"
#include "zerotrain/estimate/fit_check.h"
#include "zerotrain/models/models.h"
#include "zerotrain/stages/traits.h"

namespace zerotrain::tools {
namespace {

struct TrainOptions {
  std::string model = "gpt";
  std::string model_config;
  std::string dataset = "synthetic";
  std::string deepspeed;
  config::TrainerArgs args;
  int64_t max_steps = 100;
  int64_t logging_steps = 10;
  std::string metrics_file;
  std::string log_level = "passive";
  int local_rank = -1;             // DeepSpeed's launcher appends --local_rank=N
  bool skip_memory_check = false;
  // Checkpoints, as HF's TrainingArguments: every save_steps optimizer steps and at the end,
  // into <output_dir>/checkpoint-<step>/ (save_steps saves nothing without output_dir).
  std::string output_dir;
  int64_t save_steps = 500;          // HF's default
  bool save_steps_given = false;
  int64_t save_total_limit = 0;      // 0: keep every checkpoint (HF's None)
  std::string resume_from_checkpoint;   // a checkpoint folder, or "true": the newest in output_dir
};

namespace fs = std::filesystem;

// The flags that need no communicator, checked before the job starts (HF checks none of
// the ranges; a negative count here is a typo, not "never").
void check_checkpoint_flags(const TrainOptions& o) {
  ZT_CHECK(o.save_steps >= 0, UsageError, "--save_steps: must be at least 0 (0 saves no checkpoint), got ",
           o.save_steps);
  ZT_CHECK(o.save_total_limit >= 0, UsageError,
           "--save_total_limit: must be at least 0 (0 keeps every checkpoint), got ", o.save_total_limit);
  ZT_CHECK(!o.save_steps_given || o.save_steps == 0 || !o.output_dir.empty(), UsageError, "--save_steps ", o.save_steps,
           " saves checkpoints into --output_dir: give --output_dir DIR (or --save_steps 0 to save none)");
}

// Creates --output_dir before training, so a path that cannot be written fails now rather
// than at the first save; every rank agrees, so none waits for another in a collective.
void prepare_output_dir(const std::string& dir, bool leader, comm::Communicator& comm) {
  std::string error;
  if (leader) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir)) {
      error = "--output_dir " + dir + ": cannot create it (" + (ec ? ec.message() : std::string("not a directory")) +
              "); give a directory this job can write";
    }
  }
  auto failed = torch::full({1}, static_cast<int64_t>(!error.empty()), torch::kLong);
  comm.all_reduce(failed, comm::ReduceOp::kMax).wait();
  ZT_CHECK(error.empty(), IoError, error);
  ZT_CHECK(failed.item<int64_t>() == 0, IoError, "--output_dir ", dir,
           ": another rank could not create it; its message says why");
}

// What a checkpoint of `zerotrain train` records about the data stream (its client_state).
config::Json stream_state(const TrainOptions& o, int64_t global_batch) {
  return {{"zerotrain_train",
           {{"model", o.model},
            {"model_config", o.model_config},
            {"seed", o.args.seed},
            {"train_batch_size", global_batch}}}};
}

// The data continue from the checkpoint's sample count; they are the uninterrupted run's
// only with the same seed and global batch. Either differing is allowed, and said.
void warn_if_stream_differs(const config::Json& saved, const TrainOptions& o, int64_t global_batch,
                            const fs::path& from) {
  // The saved value of `key` when it differs from `now` (a checkpoint of another program
  // may hold anything here).
  auto saved_if_different = [&](const char* key, int64_t now) -> std::optional<int64_t> {
    if (!saved.is_object() || !saved.contains("zerotrain_train")) return std::nullopt;
    const config::Json& t = saved["zerotrain_train"];
    if (!t.is_object() || !t.contains(key) || !t[key].is_number_integer() || t[key].get<int64_t>() == now) {
      return std::nullopt;
    }
    return t[key].get<int64_t>();
  };
  if (const auto seed = saved_if_different("seed", o.args.seed)) {
    ZT_LOG_WARN("resuming from ", from.string(), " with --seed ", o.args.seed, " but it was saved with --seed ", *seed,
                ": the data from here on differ from that run's");
  }
  if (const auto batch = saved_if_different("train_batch_size", global_batch)) {
    ZT_LOG_WARN("resuming from ", from.string(), " with a global batch of ", global_batch, " but it was saved with ",
                *batch, ": the samples continue where it stopped, in batches of ", global_batch);
  }
}

// Saves <output_dir>/checkpoint-<step>, then applies --save_total_limit. A failed save stops
// training with the engine's reason and where to resume from, and leaves no empty folder.
void save_checkpoint(Engine& engine, const TrainOptions& o, const config::Json& client_state, bool leader) {
  const int64_t step = engine.global_steps();
  const fs::path dir = train_checkpoints::folder(o.output_dir, step);
  try {
    engine.save_checkpoint(dir.string(), "", client_state);
  } catch (const CheckpointError& e) {
    if (leader) {
      std::error_code ec;
      fs::remove(dir, ec);   // only when empty: the engine made it and removed its staging directory
    }
    std::string resume = "no earlier checkpoint in " + o.output_dir + " to resume from";
    for (const auto& [saved_step, saved] : train_checkpoints::list_folders(o.output_dir)) {
      if (saved_step < step && train_checkpoints::incomplete_reason(saved).empty()) {
        resume = "resume with --resume_from_checkpoint " + saved.string();
      }
    }
    throw CheckpointError(e.message() + "\nTraining stopped at global step " + std::to_string(step) + " (" + resume +
                          " once the cause is fixed).");
  }
  if (leader) train_checkpoints::rotate(o.output_dir, o.save_total_limit, dir);
}

// DeepSpeed's launcher passes --local_rank=N, and torchrun's environment LOCAL_RANK; when
// both are there they must agree (a script given the wrong one would use another's device).
void check_local_rank(int given) {
  if (given < 0) return;
  const auto from_env = env::get_int("LOCAL_RANK");
  ZT_CHECK(!from_env || *from_env == given, UsageError, "--local_rank=", given, " but LOCAL_RANK=", *from_env,
           " in the environment; drop the flag or launch with a launcher that sets both alike");
}

// The estimator's peak against what this host has left, before the model is built: a job
// that cannot fit is refused with what would (every rank agrees: one too-large verdict
// stops all of them, so none waits for the others in a collective).
void check_memory_fits(const Config& resolved, const estimate::ModelShape& shape, comm::Communicator& comm,
                       int64_t used_bytes) {
  Config config = resolved;
  config::finalize(config, comm.world_size());   // the micro-batch, as the engine will derive it
  const int on_host = static_cast<int>(
      env::get_int("LOCAL_WORLD_SIZE").value_or(env::get_int("OMPI_COMM_WORLD_LOCAL_SIZE").value_or(comm.world_size())));
  const auto verdict =
      estimate::check_fit(shape, estimate::setup_from_config(config, comm.world_size()),
                          {.ranks_on_host = std::max(1, on_host), .already_used_bytes = used_bytes});
  auto worst = torch::full({1}, static_cast<int64_t>(verdict.kind == estimate::FitVerdict::Kind::kTooLarge), torch::kLong);
  comm.all_reduce(worst, comm::ReduceOp::kMax).wait();
  if (worst.item<int64_t>() > 0) {
    ZT_CHECK(verdict.kind != estimate::FitVerdict::Kind::kTooLarge, ResourceError, "the job does not fit in memory: ",
             verdict.message, ". (--skip_memory_check trains anyway.)");
    throw ResourceError("the job does not fit in memory on another rank's host; its message says what to change");
  }
  if (verdict.kind == estimate::FitVerdict::Kind::kTight && comm.rank() == 0) {
    ZT_LOG_WARN("memory is tight: ", verdict.message);
  }
}

int64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

// One value per rank, gathered to every rank.
std::vector<int64_t> per_rank(comm::Communicator& comm, int64_t value) {
  auto all = torch::empty({comm.world_size()}, torch::kLong);
  comm.all_gather(torch::full({1}, value, torch::kLong), all).wait();
  return std::vector<int64_t>(all.data_ptr<int64_t>(), all.data_ptr<int64_t>() + comm.world_size());
}

int run_train(TrainOptions o) {
  log::set_level(o.log_level);
  check_local_rank(o.local_rank);
  ZT_CHECK(o.dataset == "synthetic", UsageError, "--dataset ", o.dataset,
           ": this build has the synthetic datasets only (--dataset synthetic)");
  ZT_CHECK(!o.deepspeed.empty(), UsageError, "--deepspeed FILE: give the DeepSpeed config to train with");
  ZT_CHECK(o.max_steps > 0 && o.logging_steps > 0, UsageError, "--max_steps and --logging_steps must be positive");
  check_checkpoint_flags(o);
  const int64_t save_steps = o.output_dir.empty() ? 0 : o.save_steps;
  const std::optional<fs::path> resume = train_checkpoints::resolve_resume(o.resume_from_checkpoint, o.output_dir);
  auto config = Config::from_file(o.deepspeed);
  auto comm = comm::Communicator::init(comm::options_from_config(config));
  o.args.world_size = comm.world_size();
  o.args.num_training_steps = o.max_steps;
  // HF fills the ZeRO bucket sizes from the model's hidden size (stage 3's prefetch bucket
  // and persistence threshold too); counted from --model_config without building the model.
  const estimate::ModelShape shape = models::shape_of(o.model, o.model_config);
  o.args.hidden_size = shape.gpt ? shape.gpt->n_embd : shape.mlp->n_hidden;
  config::resolve_auto(config, o.args);

  // The runtime's own memory (LibTorch, the communicator) before the model: what
  // `zerotrain estimate` calls runtime_bytes.
  const int64_t baseline_rss = peak_rss_bytes();
  if (!o.skip_memory_check) check_memory_fits(config, shape, comm, baseline_rss);
  torch::manual_seed(static_cast<uint64_t>(o.args.seed));
  std::unique_ptr<models::Model> model;
  {
    // At stage 3 each rank keeps 1/N of every unit as it is built, as HF's Trainer builds
    // the model under DeepSpeed's zero.Init: the model is never whole on any rank.
    std::optional<ZeroInit> zero_init;
    if (stages::traits_of(static_cast<int>(config.zero_optimization.stage)).shards_parameters) {
      zero_init.emplace(config, comm);
    }
    model = models::make_model(o.model, o.model_config);
  }
  auto engine = initialize(model->module(), config, {.comm = comm});
  // Makes and deletes checkpoint folders, by the engine's rule.
  const bool leader = checkpoint::leads_save_directory(engine.config().checkpoint.use_node_local_storage, comm.rank());
  if (save_steps > 0) prepare_output_dir(o.output_dir, leader, comm);
  const auto [dim0, dim1] = model->data_dims();
  const data::SyntheticDataset dataset(o.model, dim0, dim1, static_cast<uint64_t>(o.args.seed));

  const int64_t micro = engine.config().train_micro_batch_size_per_gpu.value.value_or(1);
  const int64_t accumulation = engine.config().gradient_accumulation_steps.value.value_or(1);
  const int64_t global_batch = engine.config().train_batch_size.value.value_or(micro);
  const int ws = comm.world_size(), rank = comm.rank();
  std::optional<files::OutputFile> metrics;
  if (rank == 0 && !o.metrics_file.empty()) metrics.emplace(o.metrics_file, "--metrics_file");
  if (rank == 0) {
    std::cout << "zerotrain train: " << model->describe() << ", " << dtype_name(engine.model_dtype()) << ", ZeRO stage "
              << engine.config().zero_optimization.stage
              << ", world size " << ws << ", global batch " << global_batch << " (" << micro << " x " << accumulation
              << " x " << ws << ")" << std::endl;
  }
  const config::Json client_state = stream_state(o, global_batch);
  if (resume) {
    const auto loaded = engine.load_checkpoint(resume->string());
    ZT_CHECK(loaded.has_value(), CheckpointError, "--resume_from_checkpoint ", resume->string(),
             ": its `latest` file disappeared while the job started");
    if (rank == 0) {
      warn_if_stream_differs(loaded->client_state, o, global_batch, *resume);
      std::cout << "zerotrain train: resumed from " << loaded->path << " at global step " << engine.global_steps()
                << "; training to step " << o.max_steps << std::endl;
    }
  }
  const int64_t first_step = engine.global_steps(), first_samples = engine.global_samples();
  const auto start = std::chrono::steady_clock::now();
  auto last_log = start;
  int64_t last_log_samples = first_samples;
  double final_loss = 0;
  // From the step the checkpoint ended at (0 without one) to --max_steps, as HF's Trainer.
  for (int64_t step = first_step; step < o.max_steps; ++step) {
    // The global batch of a step is the samples that follow those already trained on,
    // global_samples (step x global batch): a function of the step and the seed alone, so
    // a resumed run at any world size sees the uninterrupted run's batches.
    const int64_t first_sample = engine.global_samples();
    double loss_sum = 0;
    for (int64_t k = 0; k < accumulation; ++k) {
      // DistributedSampler semantics over one global batch: world 1 x accumulation 4 and
      // world 2 x accumulation 2 see the same samples per step.
      const auto batch = dataset.batch(first_sample + (k * ws + rank) * micro, micro);
      auto loss = model->loss(batch.inputs, batch.targets);
      engine.backward(loss);
      engine.step();
      loss_sum += loss.item<double>();
    }
    const int64_t done = engine.global_steps();
    // HF's DefaultFlowCallback: a save every save_steps steps, and one at the last step.
    const bool save_now = save_steps > 0 && (done % save_steps == 0 || done == o.max_steps);
    if (done % o.logging_steps != 0 && done != o.max_steps) {
      if (save_now) save_checkpoint(engine, o, client_state, leader);
      continue;
    }
    auto mean_loss = torch::full({1}, loss_sum / static_cast<double>(accumulation), torch::kDouble);
    comm.all_reduce(mean_loss, comm::ReduceOp::kAvg).wait();   // the global batch's mean
    final_loss = mean_loss.item<double>();
    const auto now = std::chrono::steady_clock::now();
    const double window_s = std::chrono::duration<double>(now - last_log).count();
    const int64_t samples = engine.global_samples();
    const auto state_bytes = per_rank(comm, engine.model_state_bytes().total());
    const auto rss = per_rank(comm, peak_rss_bytes());
    const auto baselines = per_rank(comm, baseline_rss);
    if (rank == 0) {
      nlohmann::ordered_json line{{"step", engine.global_steps()},
                                  {"loss", final_loss},
                                  {"lr", engine.get_lr().front()},
                                  {"grad_norm", engine.get_global_grad_norm().value_or(0.0)},
                                  {"loss_scale", engine.loss_scale()},
                                  {"skipped", engine.skipped_steps()},
                                  {"samples_per_s", static_cast<double>(samples - last_log_samples) / window_s},
                                  {"elapsed_s", std::chrono::duration<double>(now - start).count()},
                                  {"model_state_bytes", state_bytes},
                                  {"peak_rss_bytes", rss},
                                  {"baseline_rss_bytes", baselines}};
      std::cout << "step " << engine.global_steps() << "  loss " << final_loss << "  lr " << engine.get_lr().front()
                << "  " << line["samples_per_s"].get<double>() << " samples/s";
      if (engine.model_dtype() == torch::kHalf) {
        std::cout << "  loss scale " << engine.loss_scale() << "  skipped " << engine.skipped_steps();
      }
      std::cout << std::endl;
      if (metrics) metrics->write(line.dump() + "\n");
    }
    last_log = now;
    last_log_samples = samples;
    if (save_now) save_checkpoint(engine, o, client_state, leader);   // after the log line, as HF
  }
  if (rank == 0 && first_step >= o.max_steps) {
    std::cout << "zerotrain train: nothing to train: the run is at global step " << first_step
              << " and --max_steps is " << o.max_steps << std::endl;
  }
  if (metrics) {
    const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const int64_t trained_samples = engine.global_samples() - first_samples;   // by this run
    nlohmann::ordered_json end{{"event", "end"},
                               {"steps", engine.global_steps()},
                               {"samples", engine.global_samples()},
                               {"final_loss", final_loss},
                               {"elapsed_s", elapsed_s},
                               {"samples_per_s", static_cast<double>(trained_samples) / elapsed_s}};
    if (resume) end["resumed_from"] = resume->string();
    metrics->write(end.dump() + "\n");
    metrics->close();
  }
  return 0;
}

}  // namespace

Command add_train_command(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand("train", "Train a built-in model (mlp, gpt) with a DeepSpeed config");
  cmd->add_option("--model", o->model, "mlp or gpt")->capture_default_str();
  cmd->add_option("--model_config", o->model_config, "preset=NAME,key=value,... (presets: tiny, small; gpt2)");
  cmd->add_option("--dataset", o->dataset, "synthetic")->capture_default_str();
  cmd->add_option("--deepspeed", o->deepspeed, "The DeepSpeed config (ds_config.json)")->required();
  cmd->add_option("--per_device_train_batch_size", o->args.per_device_train_batch_size)->capture_default_str();
  cmd->add_option("--gradient_accumulation_steps", o->args.gradient_accumulation_steps)->capture_default_str();
  cmd->add_option("--learning_rate", o->args.learning_rate)->capture_default_str();
  cmd->add_option("--weight_decay", o->args.weight_decay)->capture_default_str();
  cmd->add_option("--max_grad_norm", o->args.max_grad_norm)->capture_default_str();
  cmd->add_option("--warmup_steps", o->args.warmup_steps)->capture_default_str();
  auto* fp16 = cmd->add_flag("--fp16", o->args.fp16, "Train in fp16 with loss scaling (fills \"fp16\": {\"enabled\": \"auto\"})");
  cmd->add_flag("--bf16", o->args.bf16, "Train in bf16 (fills \"bf16\": {\"enabled\": \"auto\"})")->excludes(fp16);
  cmd->add_option("--max_steps", o->max_steps)->capture_default_str();
  cmd->add_option("--seed", o->args.seed)->capture_default_str();
  cmd->add_option("--logging_steps", o->logging_steps)->capture_default_str();
  cmd->add_option("--metrics_file", o->metrics_file, "Rank 0 writes one JSON object per logged step here");
  cmd->add_option("--log_level", o->log_level,
                  "debug, info, warning, error, critical or passive (HF's; passive keeps ZEROTRAIN_LOG_LEVEL or info)")
      ->capture_default_str();
  cmd->add_option("--local_rank", o->local_rank, "Set by DeepSpeed's launcher (--local_rank=N); must match LOCAL_RANK")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--skip_memory_check", o->skip_memory_check,
                "Train even when the estimated peak exceeds the memory this host has left");
  cmd->add_option("--output_dir", o->output_dir,
                  "Where checkpoints go: DIR/checkpoint-<step>/ (the engine's save dir: global_step<step>/, latest)");
  auto* save_steps =
      cmd->add_option("--save_steps", o->save_steps,
                      "Save a checkpoint every N optimizer steps and at the last step, with --output_dir (0: never)")
          ->capture_default_str();
  cmd->add_option("--save_total_limit", o->save_total_limit,
                  "Keep the newest N checkpoint-<step> folders, deleting older ones after each save (0: keep all)")
      ->capture_default_str();
  cmd->add_option("--resume_from_checkpoint", o->resume_from_checkpoint,
                  "Continue from a checkpoint-<step> folder (any world size, stage, dtype), or `true`: the newest "
                  "complete one in --output_dir");
  return {cmd, [o, save_steps] {
            o->save_steps_given = save_steps->count() > 0;
            return run_train(*o);
          }};
}

}  // namespace zerotrain::tools
