// Reading JSON the way DeepSpeed does (it parses with hjson): `//` and `/* */` comments and
// trailing commas are accepted; duplicate keys are an error that names each one by path.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>

namespace zerotrain::config {

using Json = nlohmann::ordered_json;   // keeps the file's key order for echoing

// Bounds on what is parsed at all. DeepSpeed's own configs are a few KB and a few levels
// deep; the bounds are far above that and far below what would exhaust memory or stack.
inline constexpr int64_t kMaxJsonBytes = 4 << 20;
inline constexpr size_t kMaxJsonDepth = 64;

// Parses `text`; `origin` names the source in error messages (a file name, "<string>").
// Throws ConfigError with line and column on a syntax error, and with every duplicated
// key's JSON path on duplicates, and when the text is larger or nested deeper than the
// bounds above.
Json parse_json_text(std::string_view text, std::string_view origin = "<string>");

// Reads and parses a file. Throws ConfigError when it is missing or unreadable, or not a
// regular file (a directory, FIFO or device; the message says which).
Json read_json_file(const std::filesystem::path& path);

}  // namespace zerotrain::config
