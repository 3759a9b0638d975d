#include "zerotrain/core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <string>

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

}  // namespace

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = make_logger();
  return *instance;
}

void set_rank(int rank) { logger().set_pattern(pattern_for(rank)); }

}  // namespace zerotrain::log
