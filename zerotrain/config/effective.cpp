#include "zerotrain/config/effective.h"

#include <algorithm>
#include <sstream>

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
  std::ostringstream out;
  for (Source source : {Source::kFile, Source::kArgument, Source::kAuto, Source::kDerived, Source::kAutoPending}) {
    const std::string head = std::string("  ") + to_string(source) + ": ";
    std::string line = head;
    bool any = false;
    for (const auto& [path, value] : rows) {
      if (config.source_of(path) != source) continue;
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
