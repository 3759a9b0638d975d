#include "zerotrain/models/fields.h"

#include <sstream>
#include <vector>

#include "zerotrain/core/error.h"
#include "zerotrain/core/strings.h"

namespace zerotrain::models {

Fields parse_fields(const std::string& model, const std::string& text, const std::map<std::string, Fields>& presets,
                    const std::string& default_preset, const Fields& from_data, const std::string& data_name) {
  std::string preset = default_preset;
  std::vector<std::pair<std::string, std::string>> overrides;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    ZT_CHECK(eq != std::string::npos, UsageError, "--model_config '", item, "': write key=value");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "preset") {
      preset = value;
    } else {
      overrides.emplace_back(key, value);
    }
  }
  auto it = presets.find(preset);
  if (it == presets.end()) {
    std::vector<std::string> names;
    for (const auto& [name, fields] : presets) names.push_back(name);
    throw UsageError(detail::str("--model_config preset=", preset, ": ", model, " has the presets ", strings::join_words(names)));
  }
  Fields fields = it->second;
  for (const auto& [key, value] : from_data) fields[key] = value;
  for (const auto& [key, value] : overrides) {
    if (!fields.count(key)) {
      std::vector<std::string> keys;
      for (const auto& [k, v] : fields) keys.push_back(k);
      const auto near = strings::closest_match(key, keys);
      throw UsageError(detail::str("--model_config: ", model, " has no field '", key, "'",
                                   near ? "; did you mean " + *near + "?" : "", " (fields: ", strings::join_words(keys), ")"));
    }
    const int64_t most = key == "n_layer" ? kMaxLayers : kMaxWidth;
    int64_t parsed = 0;
    try {
      size_t used = 0;
      parsed = std::stoll(value, &used);
      ZT_CHECK(used == value.size() && parsed > 0 && parsed <= most, UsageError, "");
    } catch (const std::exception&) {
      throw UsageError(detail::str("--model_config ", key, "=", value, ": give a positive integer, at most ", most));
    }
    const auto fixed = from_data.find(key);
    ZT_CHECK(fixed == from_data.end() || fixed->second == parsed, UsageError, "--model_config ", key, "=", parsed,
             " but ", data_name, " has ", key, "=", fixed->second, ": drop it from --model_config (the dataset sets it)");
    fields[key] = parsed;
  }
  return fields;
}

}  // namespace zerotrain::models
