#include "zerotrain/config/stage_traits.h"

#include "zerotrain/core/error.h"

namespace zerotrain::config {

std::optional<StageTraits> find_traits(int64_t stage) {
  if (stage < 0 || stage > 3) return std::nullopt;
  StageTraits t;
  t.number = static_cast<int>(stage);
  t.shards_optimizer = stage >= 1;
  t.shards_gradients = stage >= 2;
  t.shards_parameters = stage >= 3;
  t.reduces_every_backward = stage >= 2;
  return t;
}

StageTraits traits_of(int stage) {
  const std::optional<StageTraits> t = find_traits(stage);
  ZT_CHECK(t.has_value(), UsageError, "ZeRO stage ", stage, " does not exist (0..3)");
  return *t;
}

bool is_supported(const StageTraits&) { return true; }

void check_supported(const StageTraits& stage) {
  ZT_CHECK(is_supported(stage), NotSupported, "zero_optimization.stage ", stage.number, ": not in this build");
}

}  // namespace zerotrain::config
