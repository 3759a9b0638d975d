// Reading JSON the way DeepSpeed does (it parses with hjson): `//` and `/* */` comments and
// trailing commas are accepted; duplicate keys are an error that names each one by path.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string_view>

namespace zerotrain::config {

using Json = nlohmann::ordered_json;   // keeps the file's key order for echoing

// Parses `text`; `origin` names the source in error messages (a file name, "<string>").
// Throws ConfigError with line and column on a syntax error, and with every duplicated
// key's JSON path on duplicates.
Json parse_json_text(std::string_view text, std::string_view origin = "<string>");

// Reads and parses a file. Throws ConfigError when it is missing or unreadable.
Json read_json_file(const std::filesystem::path& path);

}  // namespace zerotrain::config
