// Helpers for config tests: load a JSON text and look at what the load found.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "zerotrain/config/config.h"

namespace zerotrain::config::testing {

inline Config load(const std::string& text, LoadOptions options = {}) {
  return load_config(parse_json_text(text), options);
}

// All diagnostics of one severity, one per line, for assertions and failure messages.
inline std::string messages(const Config& c, Severity severity) {
  std::string out;
  for (const auto& d : c.diagnostics.items()) {
    if (d.severity == severity) out += d.to_string() + "\n";
  }
  return out;
}
inline std::string errors(const Config& c) { return messages(c, Severity::kError); }
inline std::string warnings(const Config& c) { return messages(c, Severity::kWarning); }
inline std::string unsupported(const Config& c) { return messages(c, Severity::kNotSupported); }

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace zerotrain::config::testing
