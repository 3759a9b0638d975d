#include "zerotrain/stages/traits.h"

#include "zerotrain/core/error.h"

namespace zerotrain::stages {

StageTraits traits_of(int stage) {
  ZT_CHECK(stage >= 0 && stage <= 3, UsageError, "ZeRO stage ", stage, " does not exist (0..3)");
  StageTraits t;
  t.number = stage;
  t.shards_optimizer = stage >= 1;
  t.shards_gradients = stage >= 2;
  t.shards_parameters = stage >= 3;
  t.reduces_every_backward = stage >= 2;
  return t;
}

bool is_supported(const StageTraits&) { return true; }

void check_supported(const StageTraits& stage) {
  ZT_CHECK(is_supported(stage), NotSupported, "zero_optimization.stage ", stage.number, ": not in this build");
}

}  // namespace zerotrain::stages
