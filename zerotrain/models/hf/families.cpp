#include "zerotrain/models/hf/families.h"

#include "zerotrain/core/error.h"
#include "zerotrain/core/strings.h"

namespace zerotrain::models::hf {

// Each defined in its file, models/hf/families/<name>.cpp.
extern const FamilyDescriptor kGpt2Family;
extern const FamilyDescriptor kLlamaFamily;

const std::vector<const FamilyDescriptor*>& families() {
  static const std::vector<const FamilyDescriptor*> table = {
      &kGpt2Family,    // gpt2
      &kLlamaFamily,   // llama, mistral, qwen2
  };
  return table;
}

const FamilyDescriptor* find_family(const std::string& model_type) {
  for (const FamilyDescriptor* family : families()) {
    for (const std::string& type : family->model_types) {
      if (type == model_type) return family;
    }
  }
  return nullptr;
}

std::string supported_model_types() {
  std::vector<std::string> types;
  for (const FamilyDescriptor* family : families()) {
    types.insert(types.end(), family->model_types.begin(), family->model_types.end());
  }
  return strings::join_words(types, " and ");
}

const FamilyDescriptor& family_of(const std::string& model_type) {
  const FamilyDescriptor* family = find_family(model_type);
  if (family == nullptr) {
    throw ConfigError(detail::str("model_type \"", model_type, "\" is not supported; zerotrain builds ",
                                  supported_model_types(), " models from a folder"));
  }
  return *family;
}

const FamilyDescriptor& family_of(const HfModelConfig& config) { return family_of(config.model_type); }

estimate::DecoderDims decoder_dims_of(const HfModelConfig& c, int64_t block) {
  estimate::DecoderDims d;
  d.n_layer = c.num_layers;
  d.n_head = c.num_heads;
  d.n_kv_head = c.num_kv_heads;
  d.head_dim = c.head_dim;
  d.hidden = c.hidden_size;
  d.intermediate = c.intermediate_size;
  d.vocab_size = c.vocab_size;
  d.block_size = block;
  d.sliding_window = c.sliding_window.value_or(0);
  return d;
}

HfModelConfig parse_hf_config(const config::Json& json, const std::string& origin) {
  if (!json.is_object()) throw ConfigError(origin + ": expected a JSON object (a model's config.json)");
  const ConfigFields f(json, origin);
  HfModelConfig c;
  c.model_type = f.text("model_type", "");
  const FamilyDescriptor* family = find_family(c.model_type);
  if (family == nullptr) {
    f.fail("model_type", (c.model_type.empty() ? std::string("missing") : "\"" + c.model_type + "\" is not supported") +
                             "; zerotrain builds " + supported_model_types() + " models from a folder");
  }
  c.family = family->name;
  family->read_config(f, c);
  c.bos_token_id = f.token("bos_token_id");
  c.eos_token_id = f.token("eos_token_id");
  return c;
}

HfModelConfig read_hf_config(const std::filesystem::path& dir) {
  const std::filesystem::path file = config_json_of(dir);
  return parse_hf_config(config::read_json_file(file), file.string());
}

}  // namespace zerotrain::models::hf
