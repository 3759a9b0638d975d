#include "zerotrain/config/json_text.h"

#include <utility>

#include "zerotrain/core/error.h"
#include "zerotrain/core/json_reader.h"
#include "zerotrain/core/text_file.h"

namespace zerotrain::config {

// The ds_config goes through the same reader as every JSON file zerotrain reads
// (core/json_reader.h), with DeepSpeed's hjson comments and trailing commas allowed.
Json parse_json_text(std::string_view text, std::string_view origin) {
  json::ReadResult read = json::read_json_text(text, {.max_bytes = kMaxJsonBytes,
                                                      .max_depth = kMaxJsonDepth,
                                                      .comments_and_trailing_commas = true,
                                                      .what = "a DeepSpeed config"});
  ZT_CHECK(read.ok(), ConfigError, origin, ": ", read.problem);
  return std::move(read.value);
}

Json read_json_file(const std::filesystem::path& path) {
  auto file = files::read_text_file(path, {.what = "config file", .max_bytes = kMaxJsonBytes});
  ZT_CHECK(file.text, ConfigError, path.string(), ": cannot read the config file: ", file.problem);
  return parse_json_text(*file.text, path.string());
}

}  // namespace zerotrain::config
