// A built-in model's configuration: integer fields from a preset, the user's
// --model_config overrides, and the values the dataset fixes (channels, classes, ...).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace zerotrain::models {

using Fields = std::map<std::string, int64_t>;

// Bounds on a field, far above any model people train (GPT-3: 96 layers, n_embd 12288) and
// low enough that every product the parameter count forms fits in 64 bits (n_layer * 12 *
// n_embd^2 < 2^62): a field of 2^63-1 once ran the shape count for hours.
constexpr int64_t kMaxLayers = int64_t{1} << 14;
constexpr int64_t kMaxWidth = int64_t{1} << 22;

// `text` is "preset=NAME,key=value,..." (no preset: `default_preset`). Unknown presets and keys are
// UsageErrors with a suggestion. `from_data` holds the fields the dataset decides: a key
// the user does not set takes the dataset's value, one the user sets must agree with it
// ("n_classes=5" on a 10-class dataset is an error naming both).
Fields parse_fields(const std::string& model, const std::string& text, const std::map<std::string, Fields>& presets,
                    const std::string& default_preset, const Fields& from_data = {},
                    const std::string& data_name = "");

}  // namespace zerotrain::models
