#include "zerotrain/core/error.h"
#include "zerotrain/stages/stage3/stage3.h"
#include "zerotrain/stages/stage_impls.h"

namespace zerotrain::stages {

std::unique_ptr<Stage> make_stage(const config::StageTraits& traits, StageContext context) {
  config::check_supported(traits);
  if (traits.shards_parameters) {
    stage3::Stage3Options options;
    if (context.zero) {
      options.persistence.param_threshold = context.zero->param_persistence_threshold.value;
      options.persistence.model_threshold = context.zero->model_persistence_threshold;
      options.schedule.prefetch_numel = context.zero->prefetch_bucket_size.value;
      options.schedule.max_live_numel = context.zero->max_live_parameters;
      options.schedule.reuse_distance_numel = context.zero->max_reuse_distance;
    }
    return std::make_unique<stage3::Stage3>(traits, std::move(context), options);
  }
  if (traits.shards_gradients) return std::make_unique<Stage2>(traits, std::move(context));
  if (traits.shards_optimizer) return std::make_unique<Stage1>(traits, std::move(context));
  return std::make_unique<Stage0>(traits, std::move(context));
}

}  // namespace zerotrain::stages
