// What each ZeRO stage shards and when it reduces, as plain facts (no LibTorch), so that
// the config checks, the engine, the estimator and the advisor read one description of the
// stages. This is the only place that turns a stage number into behaviour (docs/engine.md,
// "The stages"); it lives with the config, which needs it without LibTorch.
#pragma once

#include <cstdint>
#include <optional>

namespace zerotrain::config {

struct StageTraits {
  int number = 0;                     // for logs and messages only
  bool shards_optimizer = false;      // master weights and optimizer states: this rank's shard (1, 2, 3)
  bool shards_gradients = false;      // only this rank's shard of the gradients is kept (2, 3)
  bool shards_parameters = false;     // parameters live as shards, gathered per unit (3)
  // Gradients are reduced in every backward, not only at the accumulation boundary, so
  // no_sync() cannot apply (DeepSpeed asserts the same for stage 2 and 3).
  bool reduces_every_backward = false;
};

// The traits of ZeRO stage `stage` (0..3; UsageError otherwise).
StageTraits traits_of(int stage);
// The same, or none outside 0..3: the config reader reports such a stage, and its checks go
// on with the rest of the file rather than stop at it.
std::optional<StageTraits> find_traits(int64_t stage);

// Whether this engine runs the stage; check_supported throws NotSupported saying why not.
bool is_supported(const StageTraits& stage);
void check_supported(const StageTraits& stage);

}  // namespace zerotrain::config
