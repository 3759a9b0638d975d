// The effective config: every key path with its value and where the value came from.
// `zerotrain config check --effective` prints it as a table and the Trainer writes it to
// <output_dir>/effective_config.json; the engine logs the table at debug. At info, the engine
// logs only the values that are not DeepSpeed's defaults, in one compact block: a start
// should fit on a screen.
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

// {"config": {...}, "sources": {"zero_optimization.stage": "file", ...}}.
Json effective_json(const Config& config);

// The values that are not at their defaults, grouped by source ("file: a=1, b=true" then
// "auto: ...", "derived: ..."), each group wrapped at `width` columns. Keys the file or an
// argument set are shown as written; filled-in values only where they differ from the
// default (the keys of a block the Trainer created whole included).
std::string non_default_block(const Config& config, size_t width = 100);

}  // namespace zerotrain::config
