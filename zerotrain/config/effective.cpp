#include "zerotrain/config/effective.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "zerotrain/core/error.h"

namespace zerotrain::config {
namespace {

void flatten_into(const Json& j, const std::string& prefix, std::vector<std::pair<std::string, Json>>& rows) {
  for (const auto& [key, value] : j.items()) {
    std::string path = prefix.empty() ? key : prefix + "." + key;
    if (value.is_object() && !value.empty()) {
      flatten_into(value, path, rows);
    } else {
      rows.emplace_back(path, value);
    }
  }
}

// The value of each key in a config that sets nothing, and in one that sets only the type of
// each optional block this one has: the defaults of a block the Trainer (or a deprecated key)
// created whole, whose every key then carries the block's source. A block that needs more
// than its type to load (a schedule's total_num_steps) has no defaults here: its keys show.
std::map<std::string, Json> defaults_like(const Config& config, std::set<std::string>& skeleton_paths) {
  const Json full = config.to_json();
  std::vector<Json> skeletons = {Json::object()};
  for (const char* block : {"optimizer", "scheduler"}) {
    if (full.contains(block) && full[block].is_object() && full[block].contains("type")) {
      skeletons.push_back({{block, {{"type", full[block]["type"]}}}});
      skeleton_paths.insert(std::string(block) + ".type");
    }
  }
  std::map<std::string, Json> defaults;
  for (const Json& skeleton : skeletons) {
    try {
      for (auto& [path, value] : flatten(Config::from_json(skeleton, {.allow_unknown_keys = true}).to_json())) {
        defaults.emplace(std::move(path), std::move(value));
      }
    } catch (const Error&) {
    }
  }
  return defaults;
}

}  // namespace

std::vector<std::pair<std::string, Json>> flatten(const Json& json) {
  std::vector<std::pair<std::string, Json>> rows;
  flatten_into(json, "", rows);
  return rows;
}

std::string effective_table(const Config& config) {
  const auto rows = flatten(config.to_json());
  size_t width = 0;
  for (const auto& row : rows) width = std::max(width, row.first.size());
  std::ostringstream out;
  for (const auto& [path, value] : rows) {
    const std::string text = value.dump();
    out << "  " << path << std::string(width + 2 - path.size(), ' ') << text
        << std::string(text.size() < 14 ? 14 - text.size() : 1, ' ') << " [" << to_string(config.source_of(path))
        << "]\n";
  }
  return out.str();
}

Json effective_json(const Config& config) {
  Json out = {{"config", config.to_json()}, {"sources", Json::object()}};
  for (const auto& [path, value] : flatten(out["config"])) out["sources"][path] = to_string(config.source_of(path));
  return out;
}

std::string non_default_block(const Config& config, size_t width) {
  const auto rows = flatten(config.to_json());
  std::set<std::string> skeleton_paths;
  const std::map<std::string, Json> defaults = defaults_like(config, skeleton_paths);
  // What the file or an argument set is shown as written; a value filled in ("auto", derived)
  // is shown only where it differs from the default (a block's type always is).
  auto is_default = [&](const std::string& path, const Json& value, Source source) {
    if (source == Source::kFile || source == Source::kArgument || skeleton_paths.count(path) > 0) return false;
    const auto it = defaults.find(path);
    return it != defaults.end() && it->second == value;
  };
  std::ostringstream out;
  for (Source source : {Source::kFile, Source::kArgument, Source::kAuto, Source::kDerived, Source::kAutoPending}) {
    const std::string head = std::string("  ") + to_string(source) + ": ";
    std::string line = head;
    bool any = false;
    for (const auto& [path, value] : rows) {
      if (config.source_of(path) != source || is_default(path, value, source)) continue;
      const std::string item = path + "=" + value.dump(-1, ' ', false, Json::error_handler_t::replace);
      if (any && line.size() + 2 + item.size() > width) {
        out << line << ",\n";
        line = std::string(head.size(), ' ');
      } else if (any) {
        line += ", ";
      }
      line += item;
      any = true;
    }
    if (any) out << line << "\n";
  }
  std::string text = out.str();
  if (!text.empty()) text.pop_back();   // a log line adds its own
  return text;
}

}  // namespace zerotrain::config
