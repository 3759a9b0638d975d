// The one way zerotrain reads JSON text, whatever the file: a ds_config, a checkpoint's
// manifest.json, a safetensors header. Every reader refuses the same things the same way:
// duplicate keys at any depth (named by their JSON path: JSON would keep only one of them, and
// which one differs between readers), text larger or nested deeper than the caller's bounds,
// numbers that overflow a double, ill-formed UTF-8, and anything after the value.
//
// Like text_file.h, it does not throw: the caller turns `problem` into its own error type
// (a config's is a ConfigError, a checkpoint's a CheckpointError) and names the file.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace zerotrain::json {

using Json = nlohmann::ordered_json;   // keeps the file's key order

struct ReadOptions {
  int64_t max_bytes = 4 << 20;
  size_t max_depth = 64;   // objects and arrays open at once
  // DeepSpeed reads its config with hjson: `//` and `/* */` comments and trailing commas.
  // Only a ds_config may have them; files zerotrain writes itself never do.
  bool comments_and_trailing_commas = false;
  // Names the kind of text in the size and depth messages: "a DeepSpeed config".
  std::string_view what = "the file";
};

struct ReadResult {
  Json value;
  std::string problem;   // empty when the text was read; else what is wrong, with line and column
  bool ok() const { return problem.empty(); }
};

ReadResult read_json_text(std::string_view text, const ReadOptions& options);

}  // namespace zerotrain::json
