// The Trainer's checkpoints: HF's <output_dir>/checkpoint-<step>/ folders through the
// engine's save and load (any world size, stage and dtype), --save_total_limit, and what a
// checkpoint records about the data stream so a resumed run sees the same batches.
#include <filesystem>

#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"
#include "zerotrain/trainer/checkpoint_folders.h"
#include "zerotrain/trainer/trainer_impl.h"

namespace zerotrain {
namespace {

namespace fs = std::filesystem;
namespace folders = trainer::checkpoint_folders;

// The saved value of zerotrain_train.<key> when it differs from `now` (a checkpoint of another
// program may hold anything here).
std::optional<int64_t> saved_if_different(const config::Json& saved, const char* key, int64_t now) {
  if (!saved.is_object() || !saved.contains("zerotrain_train")) return std::nullopt;
  const config::Json& t = saved["zerotrain_train"];
  if (!t.is_object() || !t.contains(key) || !t[key].is_number_integer() || t[key].get<int64_t>() == now) {
    return std::nullopt;
  }
  return t[key].get<int64_t>();
}

}  // namespace

std::string Trainer::Impl::save() {
  ZT_CHECK(!args.output_dir.empty(), UsageError, "saving a checkpoint needs --output_dir");
  const int64_t step = engine->global_steps();
  const fs::path dir = folders::folder(args.output_dir, step);
  // HF's data position is the step: a resumed run skips step % steps_per_epoch batches of
  // epoch step / steps_per_epoch. The seed and the global batch must match for those to be
  // the same samples; they are recorded to say so when they differ.
  const config::Json client_state = {{"zerotrain_train",
                                      {{"model", model->describe()},
                                       {"seed", args.seed},
                                       {"train_batch_size", global_batch},
                                       {"epoch", state.epoch}}}};
  try {
    engine->save_checkpoint(dir.string(), "", client_state);
  } catch (const CheckpointError& e) {
    if (leader) {
      std::error_code ec;
      fs::remove(dir, ec);   // only when empty: the engine made it and removed its staging directory
    }
    std::string resume = "no earlier checkpoint in " + args.output_dir + " to resume from";
    for (const auto& [saved_step, saved] : folders::list_folders(args.output_dir)) {
      if (saved_step < step && folders::incomplete_reason(saved).empty()) {
        resume = "resume with --resume_from_checkpoint " + saved.string();
      }
    }
    throw CheckpointError(e.message() + "\nTraining stopped at global step " + std::to_string(step) + " (" + resume +
                          " once the cause is fixed).");
  }
  if (leader) folders::rotate(args.output_dir, args.save_total_limit, dir);
  each_callback([&](TrainerCallback& c) { c.on_save(args, state, control, dir.string()); });
  return dir.string();
}

void Trainer::Impl::resume(const fs::path& from) {
  const auto loaded = engine->load_checkpoint(from.string());
  ZT_CHECK(loaded.has_value(), CheckpointError, "--resume_from_checkpoint ", from.string(),
           ": its `latest` file disappeared while the job started");
  if (!is_rank0()) return;
  if (const auto seed = saved_if_different(loaded->client_state, "seed", args.seed)) {
    ZT_LOG_WARN("resuming from ", from.string(), " with --seed ", args.seed, " but it was saved with --seed ", *seed,
                ": the data from here on differ from that run's");
  }
  if (const auto batch = saved_if_different(loaded->client_state, "train_batch_size", global_batch)) {
    ZT_LOG_WARN("resuming from ", from.string(), " with a global batch of ", global_batch, " but it was saved with ",
                *batch, ": the run continues at its step count, so the batches differ from that run's");
  }
  log->say("zerotrain train: resumed from " + loaded->path + " at global step " +
           std::to_string(engine->global_steps()) + "; training to step " + std::to_string(state.max_steps));
}

}  // namespace zerotrain
