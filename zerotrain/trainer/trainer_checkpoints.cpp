// The Trainer's checkpoints: HF's <output_dir>/checkpoint-<step>/ folders through the
// engine's save and load (any world size, stage and dtype), --save_total_limit, and what a
// checkpoint records about the data stream so a resumed run sees the same batches.
#include <ATen/ATen.h>

#include <exception>
#include <filesystem>
#include <utility>

#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"
#include "zerotrain/core/output_path.h"
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

template <class F>
std::exception_ptr capture(F&& work) {
  try {
    work();
    return nullptr;
  } catch (...) {
    return std::current_exception();
  }
}

// Every rank throws when any failed, agreed by a collective so that no rank waits for
// another in the next one: a rank rethrows its own error, the others say where to look.
void throw_on_every_rank(comm::Communicator& comm, const std::exception_ptr& error, const std::string& elsewhere) {
  auto failed = at::full({1}, static_cast<int64_t>(error != nullptr), at::kLong);
  comm.all_reduce(failed, comm::ReduceOp::kMax).wait();
  if (error) std::rethrow_exception(error);
  ZT_CHECK(failed.item<int64_t>() == 0, IoError, elsewhere);
}

}  // namespace

void Trainer::Impl::prepare_output_dir(const TrainingArguments& run_args) {
  const std::string& dir = run_args.output_dir;
  const std::exception_ptr error = capture([&] {
    // Made before training, so a path that cannot be written fails now, not at the first save.
    if (leader) {
      std::error_code ec;
      fs::create_directories(dir, ec);
      ZT_CHECK(!ec && fs::is_directory(dir, ec), IoError, "--output_dir ", dir, ": cannot create it (",
               ec ? ec.message() : std::string("not a directory"), "); give a directory this job can write");
    }
    // checkpoint-N is the Trainer's own folder: a link (or a file) by that name is refused now,
    // before training, rather than at the save it would divert.
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (folders::step_of(entry.path().filename().string())) files::check_own_directory(entry.path(), "checkpoint folder");
    }
    // Checkpoints of an earlier run would be replaced by this run's saves of the same steps,
    // and deleted by its --save_total_limit: HF's examples refuse such a folder unless told.
    if (resume_from || run_args.overwrite_output_dir) return;
    std::string names;
    for (const auto& [step, folder] : folders::list_folders(dir)) {
      names += (names.empty() ? "" : ", ") + folder.filename().string();
    }
    ZT_CHECK(names.empty(), UsageError, "--output_dir ", dir, " holds checkpoints of an earlier run (", names,
             "); resume from them with --resume_from_checkpoint true, replace them with --overwrite_output_dir, or "
             "choose another --output_dir");
  });
  throw_on_every_rank(*comm, error, "--output_dir " + dir + ": another rank could not use it; its message says why");
}

void Trainer::Impl::finish_save() {
  if (saving_dir.empty()) return;
  const fs::path dir = std::exchange(saving_dir, {});
  engine->wait_for_checkpoint();
  // A background write that failed threw from the step that would have published it: its
  // folder is not complete, and rotating for it could delete the last complete one.
  if (!folders::incomplete_reason(dir).empty()) return;
  if (leader) folders::rotate(args.output_dir, args.save_total_limit, dir);
  each_callback([&](TrainerCallback& c) { c.on_save(args, state, control, dir.string()); });
}

std::string Trainer::Impl::save() {
  ZT_CHECK(!args.output_dir.empty(), UsageError, "saving a checkpoint needs --output_dir");
  finish_save();
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
  // checkpoint-N is the Trainer's own folder: a link or a file there (made since the start)
  // is refused, not followed (the engine would write the checkpoint and move `latest`
  // wherever it points). The engine makes the folder, and reports a failure to.
  std::exception_ptr refused;
  if (leader) refused = capture([&] { files::check_own_directory(dir, "checkpoint folder"); });
  throw_on_every_rank(*comm, refused,
                      "saving " + dir.string() + ": another rank refused the folder; its message says why");
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
  saving_dir = dir.string();
  if (!engine->checkpoint_in_flight()) finish_save();
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
