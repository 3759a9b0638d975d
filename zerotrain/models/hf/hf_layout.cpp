#include "zerotrain/models/hf/hf_layout.h"

#include <string>

#include "zerotrain/models/hf/families.h"

namespace zerotrain::models::hf {

int64_t HfParam::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string HfParam::module() const {
  const auto dot = name.rfind('.');
  return dot == std::string::npos ? std::string() : name.substr(0, dot);
}

std::string base_model_prefix(const HfModelConfig& config) { return family_of(config).base_model_prefix; }

std::vector<HfParam> hf_params(const HfModelConfig& config) { return family_of(config).params(config); }

}  // namespace zerotrain::models::hf
