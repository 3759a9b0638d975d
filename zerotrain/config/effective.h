// The effective config as a table: every key path with its value and where the value came
// from. `zerotrain config check` prints it; the engine logs it at start-up on rank 0, as
// DeepSpeed logs its configuration.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "zerotrain/config/config.h"

namespace zerotrain::config {

// Leaf key paths of `json` with their values ("zero_optimization.stage", 2).
std::vector<std::pair<std::string, Json>> flatten(const Json& json);

// One line a key: "  path   value   [source]".
std::string effective_table(const Config& config);

}  // namespace zerotrain::config
