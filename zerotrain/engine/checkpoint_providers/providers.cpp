#include "zerotrain/engine/checkpoint_providers/providers.h"

#include <torch/nn/module.h>

#include <unordered_set>

#include "zerotrain/engine/engine_state.h"

namespace zerotrain::engine::detail {

checkpoint::Providers checkpoint_providers(EngineState& s, const CheckpointLoadOptions& options) {
  checkpoint::Providers out;
  out.push_back(model_states_provider(s, options));
  out.push_back(module_tensors_provider(s, options));
  out.push_back(counters_provider(s, options));
  out.push_back(schedule_provider(s, options));
  out.push_back(loss_scaler_provider(s, options));
  out.push_back(generators_provider(s, options));
  return out;
}

std::vector<std::pair<std::string, at::Tensor>> frozen_parameters(EngineState& s) {
  std::unordered_set<const void*> trained;
  for (const GroupState& g : s.groups) {
    for (const at::Tensor& p : g.params) trained.insert(p.unsafeGetTensorImpl());
  }
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& item : s.model->named_parameters()) {
    if (trained.insert(item.value().unsafeGetTensorImpl()).second) out.emplace_back(item.key(), item.value());
  }
  return out;
}

}  // namespace zerotrain::engine::detail
