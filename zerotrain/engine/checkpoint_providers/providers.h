// The engine's state, as checkpoint providers (checkpoint/protocol/provider.h): what a
// checkpoint saves of a training engine and where a load puts it. The transaction itself is
// checkpoint/protocol's. Internal to engine/.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "zerotrain/checkpoint/protocol/provider.h"

namespace zerotrain {
struct CheckpointLoadOptions;
}

namespace zerotrain::engine::detail {

struct EngineState;

// Every provider of an engine, in the order their loads commit: the weights and optimizer
// states first (they are published to the model), then the module's other tensors, the
// counters, the schedule (which sets the learning rates from the counters' step), the loss
// scaler and the generators.
checkpoint::Providers checkpoint_providers(EngineState& s, const CheckpointLoadOptions& options);

// One each (model_states.cpp, module_tensors.cpp, training_state.cpp, generators.cpp).
std::unique_ptr<checkpoint::StateProvider> model_states_provider(EngineState& s, const CheckpointLoadOptions& options);
std::unique_ptr<checkpoint::StateProvider> module_tensors_provider(EngineState& s, const CheckpointLoadOptions& options);
std::unique_ptr<checkpoint::StateProvider> counters_provider(EngineState& s, const CheckpointLoadOptions& options);
std::unique_ptr<checkpoint::StateProvider> schedule_provider(EngineState& s, const CheckpointLoadOptions& options);
std::unique_ptr<checkpoint::StateProvider> loss_scaler_provider(EngineState& s, const CheckpointLoadOptions& options);
std::unique_ptr<checkpoint::StateProvider> generators_provider(EngineState& s, const CheckpointLoadOptions& options);

// The model's parameters that the engine does not train (requires_grad false), by name:
// saved whole, as its buffers are.
std::vector<std::pair<std::string, at::Tensor>> frozen_parameters(EngineState& s);

}  // namespace zerotrain::engine::detail
