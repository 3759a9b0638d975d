#include "zerotrain/models/hf/hf_config.h"

#include "zerotrain/core/error.h"

namespace zerotrain::models::hf {

using config::Json;

ConfigFields::ConfigFields(const Json& json, std::string origin, std::string block)
    : json_(json), origin_(std::move(origin)), block_(std::move(block)) {}

ConfigFields ConfigFields::nested(const std::string& field) const {
  if (!json_[field].is_object()) fail(field, detail::str("expected an object, got ", json_[field].dump()));
  return ConfigFields(json_[field], origin_, name(field));
}

void ConfigFields::fail(const std::string& field, const std::string& what) const {
  throw ConfigError(detail::str(origin_, ": ", name(field), ": ", what));
}

bool ConfigFields::has(const std::string& field) const { return json_.contains(field) && !json_[field].is_null(); }

int64_t ConfigFields::integer(const std::string& field, std::optional<int64_t> fallback, int64_t min) const {
  if (!has(field)) {
    if (!fallback) fail(field, "missing; a model's config.json gives it (save the model with save_pretrained)");
    return *fallback;
  }
  const Json& v = json_[field];
  if (!v.is_number_integer()) fail(field, detail::str("expected an integer, got ", v.dump()));
  const int64_t value = v.get<int64_t>();
  if (value < min) fail(field, detail::str("must be at least ", min, ", got ", value));
  return value;
}

double ConfigFields::number(const std::string& field, double fallback) const {
  if (!has(field)) return fallback;
  const Json& v = json_[field];
  if (!v.is_number()) fail(field, detail::str("expected a number, got ", v.dump()));
  return v.get<double>();
}

bool ConfigFields::flag(const std::string& field, bool fallback) const {
  if (!has(field)) return fallback;
  const Json& v = json_[field];
  if (!v.is_boolean()) fail(field, detail::str("expected true or false, got ", v.dump()));
  return v.get<bool>();
}

std::string ConfigFields::text(const std::string& field, const std::string& fallback) const {
  if (!has(field)) return fallback;
  const Json& v = json_[field];
  if (!v.is_string()) fail(field, detail::str("expected a string, got ", v.dump()));
  return v.get<std::string>();
}

void ConfigFields::require(const std::string& field, const Json& implemented, const std::string& why) const {
  if (has(field) && json_[field] != implemented) {
    fail(field, detail::str(json_[field].dump(), " is not implemented (zerotrain computes ", implemented.dump(), ": ",
                            why, ")"));
  }
}

std::optional<int64_t> ConfigFields::token(const std::string& field) const {
  if (!has(field)) return std::nullopt;
  const Json& v = json_[field];
  if (v.is_array() && !v.empty() && v[0].is_number_integer()) return v[0].get<int64_t>();
  if (!v.is_number_integer()) fail(field, detail::str("expected a token id, got ", v.dump()));
  return v.get<int64_t>();
}

std::string ConfigFields::name(const std::string& field) const {
  return block_.empty() ? field : field.empty() ? block_ : block_ + "." + field;
}

RopeScaling read_rope_scaling(const ConfigFields& block) {
  RopeScaling r;
  r.type = block.text(block.has("rope_type") ? "rope_type" : "type", "default");
  if (r.type == "default") return r;
  if (r.type == "linear") {
    r.factor = block.number("factor", 0);
    if (!(r.factor > 0)) block.fail("factor", "a linear rope scaling needs a factor above 0");
    return r;
  }
  if (r.type == "llama3") {
    r.factor = block.number("factor", 0);
    r.low_freq_factor = block.number("low_freq_factor", 0);
    r.high_freq_factor = block.number("high_freq_factor", 0);
    r.original_max_position_embeddings = block.integer("original_max_position_embeddings", 0);
    if (!(r.factor > 0) || !(r.low_freq_factor > 0) || !(r.high_freq_factor > r.low_freq_factor) ||
        r.original_max_position_embeddings <= 0) {
      block.fail("", "a llama3 rope scaling needs factor > 0, 0 < low_freq_factor < high_freq_factor and "
                     "original_max_position_embeddings > 0");
    }
    return r;
  }
  block.fail("rope_type", "\"" + r.type + "\" is not implemented; zerotrain has default, linear and llama3");
}

std::string config_text_for_dtype(const std::string& text, const std::string& dtype, const std::string& origin) {
  config::Json json = config::parse_json_text(text, origin);
  if (!json.is_object()) throw ConfigError(origin + ": expected a JSON object (a model's config.json)");
  bool named = false, stale = false;
  for (const char* key : {"dtype", "torch_dtype"}) {
    if (!json.contains(key)) continue;
    named = true;
    if (json[key] != dtype) {
      json[key] = dtype;
      stale = true;
    }
  }
  if (!named) json["dtype"] = dtype;
  if (named && !stale) return text;
  return json.dump(2) + "\n";   // save_pretrained's indent
}

std::filesystem::path config_json_of(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / "config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) {
    throw ConfigError(detail::str(dir.string(), ": no config.json; a Hugging Face model folder has one (written by "
                                  "save_pretrained)"));
  }
  return file;
}

}  // namespace zerotrain::models::hf
