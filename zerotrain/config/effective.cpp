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

}  // namespace zerotrain::config
