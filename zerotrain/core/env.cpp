#include "zerotrain/core/env.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include "zerotrain/core/error.h"

namespace zerotrain::env {

std::optional<std::string> get(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::optional<int64_t> get_int(const char* name) {
  auto text = get(name);
  if (!text) return std::nullopt;
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  ZT_CHECK(ec == std::errc() && end == text->data() + text->size() && !text->empty(), ConfigError,
           "environment variable ", name, "=\"", *text, "\" is not an integer");
  return value;
}

std::optional<bool> get_bool(const char* name) {
  auto text = get(name);
  if (!text) return std::nullopt;
  std::string v = *text;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off" || v.empty()) return false;
  throw ConfigError(detail::str("environment variable ", name, "=\"", *text,
                                "\" is not a boolean; use 1/0, true/false, yes/no or on/off"));
}

std::optional<int> rank_from_env() {
  for (const char* name : {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"}) {
    if (auto v = get_int(name)) return static_cast<int>(*v);
  }
  return std::nullopt;
}

}  // namespace zerotrain::env
