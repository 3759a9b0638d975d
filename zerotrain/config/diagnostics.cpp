#include "zerotrain/config/diagnostics.h"

#include <algorithm>

#include "zerotrain/core/error.h"

namespace zerotrain::config {

std::string Diagnostic::to_string() const {
  std::string out = path.empty() ? message : path + ": " + message;
  if (!hint.empty()) out += "; " + hint;
  return out;
}

void Diagnostics::error(std::string path, std::string message, std::string hint) {
  items_.push_back({Severity::kError, std::move(path), std::move(message), std::move(hint)});
}
void Diagnostics::not_supported(std::string path, std::string message, std::string hint) {
  items_.push_back({Severity::kNotSupported, std::move(path), std::move(message), std::move(hint)});
}
void Diagnostics::warning(std::string path, std::string message, std::string hint) {
  items_.push_back({Severity::kWarning, std::move(path), std::move(message), std::move(hint)});
}

size_t Diagnostics::count(Severity severity) const {
  return std::count_if(items_.begin(), items_.end(),
                       [&](const Diagnostic& d) { return d.severity == severity; });
}

bool Diagnostics::has_errors() const {
  return count(Severity::kError) + count(Severity::kNotSupported) > 0;
}

void Diagnostics::throw_if_errors(const std::string& origin) const {
  if (!has_errors()) return;
  size_t errors = count(Severity::kError), unsupported = count(Severity::kNotSupported);
  std::string text = origin.empty() ? "" : origin + ": ";
  text += std::to_string(errors + unsupported) + (errors + unsupported == 1 ? " problem" : " problems");
  for (const auto& d : items_) {
    if (d.severity == Severity::kWarning) continue;
    text += "\n  ";
    text += d.severity == Severity::kNotSupported ? "not supported yet: " : "";
    text += d.to_string();
  }
  if (errors == 0) throw NotSupported(text);
  throw ConfigError(text);
}

const char* to_string(Source source) {
  switch (source) {
    case Source::kDefault: return "default";
    case Source::kFile: return "file";
    case Source::kDerived: return "derived";
    case Source::kAuto: return "auto";
    case Source::kAutoPending: return "auto (unresolved)";
    case Source::kArgument: return "argument";
  }
  return "?";
}

}  // namespace zerotrain::config
