// Rank-aware logging on spdlog. Every line carries the rank once a rank is known:
//   [2026-11-22 10:00:00.123] [warn] [rank 1] message
// Level from ZEROTRAIN_LOG_LEVEL (trace, debug, info, warn, error, off; default info).
// Messages use fmt syntax: ZT_LOG_INFO("step {} took {} ms", step, ms).
#pragma once

#include <spdlog/spdlog.h>

namespace zerotrain::log {

// The process-wide logger (created on first use, writes to stderr).
spdlog::logger& logger();
// Sets the rank shown in each line; -1 hides it (single-process tools).
void set_rank(int rank);

}  // namespace zerotrain::log

#define ZT_LOG_DEBUG(...) ::zerotrain::log::logger().debug(__VA_ARGS__)
#define ZT_LOG_INFO(...) ::zerotrain::log::logger().info(__VA_ARGS__)
#define ZT_LOG_WARN(...) ::zerotrain::log::logger().warn(__VA_ARGS__)
#define ZT_LOG_ERROR(...) ::zerotrain::log::logger().error(__VA_ARGS__)
