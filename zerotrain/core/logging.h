// Rank-aware logging on spdlog. Every line carries the rank once a rank is known:
//   [2026-11-22 10:00:00.123] [warn] [rank 1] message
// Level from ZEROTRAIN_LOG_LEVEL (trace, debug, info, warn, error, off; default info).
// Messages are concatenated like ZT_CHECK's: ZT_LOG_INFO("step ", step, " took ", ms, " ms").
//
// spdlog stays out of this header on purpose: LibTorch ships its own (newer) fmt headers,
// and a translation unit that sees both fmt versions does not compile.
#pragma once

#include <string>
#include <string_view>

#include "zerotrain/core/error.h"

namespace zerotrain::log {

enum class Level { kDebug, kInfo, kWarn, kError };

bool enabled(Level level);
void write(Level level, const std::string& message);
// Sets the rank shown in each line; -1 hides it (single-process tools). Under `zerotrain
// launch`, which prefixes every line of a rank with its rank, the logger never shows it.
void set_rank(int rank);
// Sets the level by name: trace, debug, info, warning (or warn), error, critical, off, and
// HF's "passive" (keep the current level). Throws UsageError naming the accepted names.
void set_level(std::string_view name);

}  // namespace zerotrain::log

#define ZT_LOG_AT(level, ...)                                                        \
  do {                                                                               \
    if (::zerotrain::log::enabled(level)) {                                          \
      ::zerotrain::log::write(level, ::zerotrain::detail::str(__VA_ARGS__));         \
    }                                                                                \
  } while (0)
#define ZT_LOG_DEBUG(...) ZT_LOG_AT(::zerotrain::log::Level::kDebug, __VA_ARGS__)
#define ZT_LOG_INFO(...) ZT_LOG_AT(::zerotrain::log::Level::kInfo, __VA_ARGS__)
#define ZT_LOG_WARN(...) ZT_LOG_AT(::zerotrain::log::Level::kWarn, __VA_ARGS__)
#define ZT_LOG_ERROR(...) ZT_LOG_AT(::zerotrain::log::Level::kError, __VA_ARGS__)
