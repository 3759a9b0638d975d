#include "zerotrain/core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cctype>
#include <cstdlib>
#include <optional>

#include "zerotrain/core/env.h"

namespace zerotrain::log {
namespace {

// `zerotrain launch` puts "[rank N] " before every line of a rank's output and says so in
// this variable: the rank is then not repeated inside the line.
bool launcher_prefixes_rank() { return env::get_bool("ZEROTRAIN_LAUNCH_PREFIXES_RANK").value_or(false); }

std::string pattern_for(int rank) {
  if (rank < 0 || launcher_prefixes_rank()) return "[%Y-%m-%d %H:%M:%S.%e] [%l] %v";
  return "[%Y-%m-%d %H:%M:%S.%e] [%l] [rank " + std::to_string(rank) + "] %v";
}

constexpr const char* kLevelNames = "trace, debug, info, warning, error, critical, off or passive";

// spdlog's own from_str turns any unknown name into "off": a typo would silence every line.
std::optional<spdlog::level::level_enum> parse_level(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // spdlog names its levels "warning" and "error" in some versions, "warn" and "err" in
  // others; both spellings are accepted whichever this build has.
  const std::string alias = lower == "warning" ? "warn" : lower == "warn" ? "warning"
                            : lower == "error"  ? "err"  : lower == "err"  ? "error" : lower;
  for (int l = spdlog::level::trace; l <= spdlog::level::off; ++l) {
    const auto level = static_cast<spdlog::level::level_enum>(l);
    const auto spdlog_name = spdlog::level::to_string_view(level);
    const std::string_view name_of_level(spdlog_name.data(), spdlog_name.size());
    if (name_of_level == lower || name_of_level == alias) return level;
  }
  return std::nullopt;
}

std::shared_ptr<spdlog::logger> make_logger() {
  auto lg = spdlog::stderr_color_mt("zerotrain");
  lg->set_pattern(pattern_for(env::rank_from_env().value_or(-1)));
  if (const char* name = std::getenv("ZEROTRAIN_LOG_LEVEL"); name != nullptr && std::string_view(name) != "passive") {
    if (auto level = parse_level(name)) {
      lg->set_level(*level);
    } else {
      lg->warn("ZEROTRAIN_LOG_LEVEL={} is not a level ({}); logging at info", name, kLevelNames);
    }
  }
  return lg;
}

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = make_logger();
  return *instance;
}

spdlog::level::level_enum to_spdlog(Level level) {
  switch (level) {
    case Level::kDebug: return spdlog::level::debug;
    case Level::kInfo: return spdlog::level::info;
    case Level::kWarn: return spdlog::level::warn;
    case Level::kError: return spdlog::level::err;
  }
  return spdlog::level::info;
}

}  // namespace

bool enabled(Level level) { return logger().should_log(to_spdlog(level)); }
void write(Level level, const std::string& message) { logger().log(to_spdlog(level), "{}", message); }
void set_rank(int rank) { logger().set_pattern(pattern_for(rank)); }

void set_level(std::string_view name) {
  if (name == "passive") return;   // HF's "keep what the library chose"
  const auto level = parse_level(name);
  ZT_CHECK(level.has_value(), UsageError, "--log_level ", name, ": give one of ", kLevelNames);
  logger().set_level(*level);
}

}  // namespace zerotrain::log
