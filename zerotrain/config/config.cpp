#include "zerotrain/config/config.h"

#include "zerotrain/config/reader.h"
#include "zerotrain/config/writer.h"
#include "zerotrain/core/env.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"
#include "zerotrain/core/output_path.h"

namespace zerotrain::config {
namespace {

void collect_paths(const Json& j, const std::string& prefix, std::vector<std::string>& out) {
  for (const auto& [key, value] : j.items()) {
    std::string path = prefix.empty() ? key : prefix + "." + key;
    out.push_back(path);
    if (value.is_object()) collect_paths(value, path, out);
  }
}

void collect_auto(const Json& j, const std::string& prefix, std::vector<std::string>& out) {
  for (const auto& [key, value] : j.items()) {
    std::string path = prefix.empty() ? key : prefix + "." + key;
    if (value.is_string() && value.get<std::string>() == "auto") out.push_back(path);
    if (value.is_object()) collect_auto(value, path, out);
  }
}

// DeepSpeed's legacy boolean form: "zero_optimization": true means stage 1 with
// allgather_bucket_size taken from the top-level "allgather_size"; false means stage 0.
// "allgather_size" means nothing beside the object form (DeepSpeed ignores it there).
struct Normalized {
  Json json;
  std::vector<std::string> derived_paths;   // keys the rewrite set: Source::kDerived
};

Normalized normalize_legacy_forms(const Json& input, Diagnostics& diags) {
  Normalized out{input, {}};
  Json& json = out.json;
  auto zero = json.find("zero_optimization");
  const bool boolean_form = zero != json.end() && zero->is_boolean();
  std::optional<Json> allgather_size;
  if (auto it = json.find("allgather_size"); it != json.end()) {
    allgather_size = *it;
    json.erase(it);
    zero = json.find("zero_optimization");   // erase invalidated the iterator
    if (!boolean_form) {
      diags.warning("allgather_size", "ignored: it only applies to the boolean form of zero_optimization",
                    "remove it; set zero_optimization.allgather_bucket_size instead");
    }
  }
  if (boolean_form) {
    bool on = zero->get<bool>();
    diags.warning("zero_optimization", "the boolean form is deprecated",
                  on ? "write {\"stage\": 1} instead of true" : "write {\"stage\": 0} instead of false");
    Json block = {{"stage", on ? 1 : 0}};
    out.derived_paths.push_back("zero_optimization.stage");
    if (on && allgather_size) {
      block["allgather_bucket_size"] = *allgather_size;
      out.derived_paths.push_back("zero_optimization.allgather_bucket_size");
    }
    *zero = block;
  }
  return out;
}

}  // namespace

Config load_config(const Json& input, const LoadOptions& options) {
  Config config;
  if (!input.is_object()) {
    config.diagnostics.error("", "the config must be a JSON object ({...}), got " + describe_json(input));
    return config;
  }
  Normalized normalized = normalize_legacy_forms(input, config.diagnostics);
  bool allow_unknown = options.allow_unknown_keys ||
                       env::get_bool("ZEROTRAIN_ALLOW_UNKNOWN_KEYS").value_or(false);
  ReadContext ctx{config.diagnostics, config.sources, !allow_unknown, &schema_paths()};
  Reader reader(&normalized.json, "", ctx);
  config.visit(reader);
  reader.finish();
  // The reader saw the rewritten keys as written in the file; they were derived from it.
  for (const auto& path : normalized.derived_paths) config.sources[path] = Source::kDerived;
  check_consistency(config, config.diagnostics);
  return config;
}

Config Config::from_json(const Json& json, const LoadOptions& options) {
  Config config = load_config(json, options);
  config.diagnostics.throw_if_errors(options.origin);
  // Every rank reads the same file: one copy of each warning is enough.
  if (env::rank_from_env().value_or(0) == 0) {
    for (const auto& d : config.diagnostics.items()) {
      ZT_LOG_WARN("[config] ", options.origin, ": ", d.to_string());
    }
  }
  return config;
}

Config Config::from_string(std::string_view text, const LoadOptions& options) {
  return from_json(parse_json_text(text, options.origin), options);
}

Config Config::from_file(const std::filesystem::path& path, LoadOptions options) {
  if (options.origin == LoadOptions{}.origin) options.origin = path.string();
  Config config = from_json(read_json_file(path), options);
  // An input of the run: no output may be written over it (core/output_path.h).
  files::register_input(path, "config file");
  return config;
}

Source Config::source_of(std::string_view path) const {
  std::string p(path);
  while (true) {
    if (auto it = sources.find(p); it != sources.end()) return it->second;
    auto dot = p.rfind('.');
    if (dot == std::string::npos) return Source::kDefault;
    p.resize(dot);
  }
}

Json Config::to_json() const {
  Config copy = *this;   // visit() is shared with the reader, so it takes a mutable block
  Writer writer;
  copy.visit(writer);
  return writer.take();
}

std::vector<std::string> Config::unresolved_auto_keys() const {
  std::vector<std::string> out;
  collect_auto(to_json(), "", out);
  return out;
}

const std::vector<std::string>& schema_paths() {
  static const std::vector<std::string> paths = [] {
    Config defaults;
    Writer writer(/*expand_absent_blocks=*/true);
    defaults.visit(writer);
    std::vector<std::string> out;
    collect_paths(writer.take(), "", out);
    return out;
  }();
  return paths;
}

}  // namespace zerotrain::config
