// What loading a config found: errors, not-supported requests and warnings, each tied to a
// JSON path, plus where every effective value came from.
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace zerotrain::config {

enum class Severity {
  kError,         // the config is wrong: a typo, a bad type or value, a removed key
  kNotSupported,  // the config is valid DeepSpeed but asks for a feature zerotrain lacks
  kWarning,       // accepted, but the user should know (deprecated alias, ignored key)
};

struct Diagnostic {
  Severity severity;
  std::string path;      // JSON path, "zero_optimization.offload_param.device"; "" for the file
  std::string message;   // what is wrong, with what was expected and what was given
  std::string hint;      // how to fix it; may be empty
  std::string to_string() const;   // "path: message; hint"
};

class Diagnostics {
 public:
  void error(std::string path, std::string message, std::string hint = {});
  void not_supported(std::string path, std::string message, std::string hint = {});
  void warning(std::string path, std::string message, std::string hint = {});

  const std::vector<Diagnostic>& items() const { return items_; }
  bool has_errors() const;   // errors or not-supported requests
  size_t count(Severity severity) const;
  // Throws ConfigError (NotSupported when every problem is a not-supported request) listing
  // every error found, one per line, when there is at least one.
  void throw_if_errors(const std::string& origin) const;

 private:
  std::vector<Diagnostic> items_;
};

// Where an effective value came from, shown by `zerotrain config check`.
enum class Source {
  kDefault,  // DeepSpeed's default: the key was absent
  kFile,     // the config file (or JSON object) set it
  kDerived,  // computed from other values (batch triangle, overlap_comm, deprecated key)
  kAuto,     // "auto" in the file, filled from Trainer arguments
  kAutoPending,   // "auto" in the file, not resolved yet
  kArgument, // a Trainer argument the file does not set (zerotrain train --zero_stage)
};
const char* to_string(Source source);
inline std::ostream& operator<<(std::ostream& out, Source source) { return out << to_string(source); }

using SourceMap = std::map<std::string, Source>;   // JSON path -> source

}  // namespace zerotrain::config
