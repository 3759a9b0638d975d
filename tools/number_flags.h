// Numeric command-line flags read as the config reader reads a number (config/field.h): the
// text is a JSON number, an integer flag takes an integer from -2^63 to 2^63-1 (integral
// floats such as 1e3 too, as DeepSpeed's config does) and a float flag a finite number.
// CLI11 alone would clamp 99999999999999999999 to 2^63-1, read 010 as octal 8 and take nan
// and inf; here each of those is a UsageError that names the flag and the text. Ranges (at
// least 1, 0 to 64, ...) are the command's checks, run on the values once they are read.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace zerotrain::tools {

// Adds `flag` to `cmd`, storing the value read into `target`; the help shows the value
// `target` holds now as the default.
CLI::Option* add_number_flag(CLI::App& cmd, const std::string& flag, int64_t& target, const std::string& help = "");
CLI::Option* add_number_flag(CLI::App& cmd, const std::string& flag, int& target, const std::string& help = "");
CLI::Option* add_number_flag(CLI::App& cmd, const std::string& flag, double& target, const std::string& help = "");
CLI::Option* add_number_flag(CLI::App& cmd, const std::string& flag, std::optional<int64_t>& target,
                             const std::string& help = "");

}  // namespace zerotrain::tools
