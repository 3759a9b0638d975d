// Engine::save_checkpoint and Engine::load_checkpoint (docs/checkpoints.md): the engine's
// providers (checkpoint_providers/) handed to the checkpoint transaction
// (checkpoint/protocol/). save_16bit_model is in model_save.cpp.
#include <filesystem>

#include "zerotrain/checkpoint/names.h"
#include "zerotrain/checkpoint/protocol/load.h"
#include "zerotrain/checkpoint/protocol/save.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"
#include "zerotrain/engine/checkpoint_providers/providers.h"
#include "zerotrain/engine/engine.h"
#include "zerotrain/engine/engine_state.h"

namespace zerotrain {

using engine::detail::EngineState;

void Engine::save_checkpoint(const std::string& save_dir, const std::string& tag, const config::Json& client_state,
                             bool save_latest) {
  EngineState& s = *state_;
  s.check_not_damaged();
  ZT_CHECK(s.micro_steps % s.accumulation_steps == 0, UsageError, "save_checkpoint at micro-step ", s.micro_steps,
           ", inside a gradient accumulation of ", s.accumulation_steps,
           " micro-steps: the gradients accumulated since the last step would be lost. Save after the step() that "
           "ends the accumulation (is_gradient_accumulation_boundary() before it)");
  if (s.client_optimizer && s.comm.rank() == 0) {
    ZT_LOG_WARN("save_checkpoint: the state of a client optimizer is not saved (only the weights, the schedule and "
                "the counters); resume with load_optimizer_states=false or configure the optimizer in the config");
  }
  checkpoint::SaveRequest request;
  request.save_dir = save_dir;
  request.tag = tag.empty() ? checkpoint::kDefaultTagPrefix + std::to_string(s.global_steps) : tag;
  request.save_latest = save_latest;
  request.use_node_local_storage = s.config.checkpoint.use_node_local_storage;
  request.tag_validation = s.config.checkpoint.tag_validation;
  request.ds_config = s.config.to_json();
  request.client_state = client_state;
  const CheckpointLoadOptions unused;
  const checkpoint::Providers providers = engine::detail::checkpoint_providers(s, unused);
  // One save at a time: the one in flight is published (or fails) first.
  s.finish_pending_save(true);
  const auto save = [&] {
    if (s.config.checkpoint.async_save) {
      s.pending_save = checkpoint::AsyncSave::start(s.comm, providers, request, s.snapshot_buffers);
    } else {
      checkpoint::save(s.comm, providers, request);
    }
  };
  // Optimizer states offloaded to files stream from their store into the checkpoint (the
  // model-states provider reads them a piece at a time); in host memory they are the store's
  // own tensors. Either way the store keeps them: nothing is written back.
  if (s.offload && s.offload->on_disk()) {
    save();
  } else {
    s.with_states_to_read(save);
  }
}

std::optional<std::string> Engine::wait_for_checkpoint() { return state_->finish_pending_save(true); }

std::optional<std::string> Engine::checkpoint_in_flight() const {
  if (!state_->pending_save) return std::nullopt;
  return state_->pending_save->dir().string();
}

namespace engine::detail {

std::optional<std::string> EngineState::finish_pending_save(bool wait) {
  if (!pending_save) return std::nullopt;
  std::optional<checkpoint::SavedCheckpoint> saved;
  try {
    saved = pending_save->finish(comm, wait);
  } catch (...) {
    pending_save.reset();   // failed on some rank: its staging directory is gone
    throw;
  }
  if (!saved) return std::nullopt;
  if (comm.rank() == 0) {
    ZT_LOG_INFO("saved checkpoint ", saved->dir.string(), " in the background: ", comm.world_size(), " rank file(s), ",
                static_cast<double>(saved->bytes) / (1 << 20), " MiB in ", saved->seconds,
                " s, of which training waited ", pending_save->blocked_seconds(), " s");
  }
  pending_save.reset();
  return saved->dir.string();
}

}  // namespace engine::detail

std::optional<LoadedCheckpoint> Engine::load_checkpoint(const std::string& load_dir, const std::string& tag,
                                                        const CheckpointLoadOptions& options) {
  EngineState& s = *state_;
  const checkpoint::Providers providers = engine::detail::checkpoint_providers(s, options);
  const checkpoint::LoadRequest request{load_dir, tag, s.config.checkpoint.tag_validation};
  s.finish_pending_save(true);   // the checkpoint to load may be the one being written
  // Optimizer states offloaded to files are streamed into their store (the model-states
  // provider writes them a piece at a time); in host memory they are read from their store,
  // loaded, and sent back.
  std::optional<checkpoint::LoadedTag> loaded;
  try {
    if (s.offload && s.offload->on_disk()) {
      loaded = checkpoint::load(s.comm, providers, request);
    } else {
      loaded = s.with_states_in_memory([&] { return checkpoint::load(s.comm, providers, request); });
    }
  } catch (const checkpoint::PartialLoadError& e) {
    s.damaged = std::string("the weights were partly overwritten by a load that failed (") + e.what() + ")";
    throw;
  }
  if (!loaded) return std::nullopt;
  s.damaged.clear();
  const checkpoint::Manifest& m = loaded->manifest;
  if (s.comm.rank() == 0) {
    ZT_LOG_INFO("loaded checkpoint ", loaded->dir.string(), " (saved by ", m.world_size, " rank(s) at ZeRO stage ",
                m.zero_stage, " in ", m.model_dtype, "; now ", s.comm.world_size(), " rank(s), stage ", s.traits().number,
                ", ", dtype_name(s.precision.model), "), global step ", s.global_steps);
  }
  return LoadedCheckpoint{loaded->dir.string(), m.client_state};
}

}  // namespace zerotrain
