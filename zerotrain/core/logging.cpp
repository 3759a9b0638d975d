#include "zerotrain/core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

#include "zerotrain/core/env.h"

namespace zerotrain::log {
namespace {

std::string pattern_for(int rank) {
  if (rank < 0) return "[%Y-%m-%d %H:%M:%S.%e] [%l] %v";
  return "[%Y-%m-%d %H:%M:%S.%e] [%l] [rank " + std::to_string(rank) + "] %v";
}

std::shared_ptr<spdlog::logger> make_logger() {
  auto lg = spdlog::stderr_color_mt("zerotrain");
  lg->set_pattern(pattern_for(env::rank_from_env().value_or(-1)));
  if (const char* level = std::getenv("ZEROTRAIN_LOG_LEVEL")) {
    lg->set_level(spdlog::level::from_str(level));
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

}  // namespace zerotrain::log
