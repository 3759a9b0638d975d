// The Trainer's state, shared by its parts: setup (trainer.cpp), the training loop
// (train_loop.cpp), evaluation (evaluation.cpp) and checkpoints (trainer_checkpoints.cpp).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "zerotrain/config/config.h"
#include "zerotrain/engine/engine.h"
#include "zerotrain/trainer/run_log.h"
#include "zerotrain/trainer/trainer.h"

namespace zerotrain {

struct Trainer::Impl {
  TrainingArguments args;
  TrainerOptions options;
  TrainerData data;
  std::optional<comm::Communicator> comm;
  Config config;
  std::unique_ptr<models::Model> model;
  std::unique_ptr<Engine> engine;
  c10::Device device{c10::kCPU};   // --device, resolved: the model, its batches and the engine's buffers
  std::vector<std::shared_ptr<TrainerCallback>> callbacks;
  TrainerState state;
  TrainerControl control;
  std::unique_ptr<trainer::RunLog> log;
  int64_t micro_batch = 1, accumulation = 1, global_batch = 1;
  int64_t baseline_rss_bytes = 0;   // before the model: the runtime's own memory
  bool leader = false;              // makes and deletes checkpoint folders
  bool saves = false;               // --output_dir given, and a save strategy that saves
  std::optional<std::filesystem::path> resume_from;   // --resume_from_checkpoint, resolved

  int rank() const { return comm->rank(); }
  int world_size() const { return comm->world_size(); }
  bool is_rank0() const { return comm->rank() == 0; }

  // Calls `event` on every callback.
  template <class F>
  void each_callback(F&& event) {
    for (auto& c : callbacks) event(*c);
  }

  Metrics evaluate();                     // evaluation.cpp
  std::string save();                     // trainer_checkpoints.cpp
  // checkpoint.async_save: the folder being written in the background. Its rotation and
  // on_save wait until finish_save() (the next save, a signal's stop, or the end), so that
  // --save_total_limit never deletes a complete folder for one that may not complete.
  std::string saving_dir;
  void finish_save();
  // Makes --output_dir, and refuses checkpoint folders of an earlier run there unless the run
  // resumes or overwrite_output_dir allows them to be replaced (trainer_checkpoints.cpp).
  // Called while the Trainer is built, before `args` is set.
  void prepare_output_dir(const TrainingArguments& run_args);
  void resume(const std::filesystem::path& from);   // trainer_checkpoints.cpp
  // The model as a Hugging Face folder in `dir` (hf_folder_save.cpp); a model built from one only.
  void save_hf(const std::filesystem::path& dir);
  TrainOutput train();                    // train_loop.cpp
};

namespace trainer {
// The peak resident memory of this process so far.
int64_t peak_rss_bytes();
// Seconds since this process started (-1 where /proc cannot say): a log line's time from the
// launch, which includes loading the runtime and building the model.
double process_age_s();
// One value per rank, gathered to every rank.
std::vector<int64_t> per_rank(comm::Communicator& comm, int64_t value);
// The mean over ranks of a value every rank holds.
double mean_over_ranks(comm::Communicator& comm, double value);
}  // namespace trainer

}  // namespace zerotrain
