// zerotrain::Trainer: HF's Trainer in C++. It reads the DeepSpeed config, fills its "auto"
// values from TrainingArguments (adding AdamW and the --lr_scheduler_type schedule when the
// config has none), builds the model (cut across the ranks as it is built at ZeRO stage 3),
// and trains it with the engine: epochs of DistributedSampler batches, evaluation, logs,
// checkpoints every N steps and resumption from them. docs/trainer.md.
//
//   zerotrain::TrainingArguments args;
//   args.deepspeed = "ds_config.json";
//   args.num_train_epochs = 2;
//   args.eval_strategy = zerotrain::IntervalStrategy::kEpoch;
//   zerotrain::Trainer trainer(args, {.build = [] { return zerotrain::models::make_model("convnet", "", shape); }},
//                              {.train = train_set, .eval = test_set});
//   trainer.train();
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/data/dataset.h"
#include "zerotrain/estimate/detailed.h"
#include "zerotrain/models/model.h"
#include "zerotrain/trainer/callbacks.h"
#include "zerotrain/trainer/training_arguments.h"

namespace zerotrain {

class Engine;

// How the Trainer gets its model: built after the config is resolved, so that at ZeRO
// stage 3 it is cut across the ranks as it is built (DeepSpeed's zero.Init).
struct ModelSpec {
  std::function<std::unique_ptr<models::Model>()> build;
  // HF's hidden_size, which fills the ZeRO bucket sizes' "auto"; unset: the built model's.
  std::optional<int64_t> hidden_size;
  // The model's shape for the memory check before it is built (unset: no check).
  std::optional<estimate::ModelShape> shape;
};

struct TrainerData {
  std::shared_ptr<const data::Dataset> train;
  std::shared_ptr<const data::Dataset> eval;   // needed by eval_strategy steps/epoch and evaluate()
};

struct TrainerOptions {
  std::optional<comm::Communicator> comm;   // unset: join the job from the config and environment
  std::string metrics_file;                 // rank 0 writes one JSON object per log, evaluation and epoch
  // Train in bf16 when the CPU computes it natively (AVX512-BF16 or AMX), fp32 otherwise,
  // unless --bf16/--fp16 or the config decide; the start-up log says which and why.
  bool bf16_if_native = false;
  bool check_memory = true;                 // refuse a job the estimator says cannot fit
  // A tokenizer's files (zerotrain train's --tokenizer folder): every Hugging Face folder the
  // Trainer writes carries these in place of the model folder's tokenizer files.
  std::vector<std::filesystem::path> hf_tokenizer_files;
};

struct TrainOutput {
  int64_t global_step = 0;
  double training_loss = 0;   // the mean of the logged losses of this run
  Metrics metrics;            // train_runtime, train_samples_per_second, epoch, ...
};

class Trainer {
 public:
  Trainer(TrainingArguments args, ModelSpec model, TrainerData data, TrainerOptions options = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  void add_callback(std::shared_ptr<TrainerCallback> callback);
  // Trains from args.resume_from_checkpoint (if given) to max_steps or num_train_epochs.
  TrainOutput train();
  // Evaluates on the eval dataset; every rank returns the same metrics (all-reduced).
  Metrics evaluate();
  // Saves <output_dir>/checkpoint-<global step> now.
  std::string save_checkpoint();

  const TrainerState& state() const;
  bool is_world_process_zero() const;   // rank 0: the one that prints and writes logs, as HF's
  const TrainingArguments& args() const;
  Engine& engine();
  models::Model& model();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace zerotrain
