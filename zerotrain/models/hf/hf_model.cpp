#include "zerotrain/models/hf/hf_model.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "zerotrain/core/env.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"
#include "zerotrain/core/input_file.h"
#include "zerotrain/core/strings.h"
#include "zerotrain/models/hf/families.h"
#include "zerotrain/models/hf/hf_config.h"
#include "zerotrain/models/hf/hf_layout.h"
#include "zerotrain/models/hf/hf_load.h"
#include "zerotrain/text/tokenizer.h"

namespace zerotrain::models::hf {
namespace {

// The config string: block_size=N, nothing else.
int64_t block_size_of(const std::string& dir, const std::string& text, const HfModelConfig& c) {
  int64_t block = std::min<int64_t>(1024, c.max_positions);
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq == std::string::npos ? item.size() : eq);
    ZT_CHECK(key == "block_size" && eq != std::string::npos, UsageError, "--model_config '", item, "': --model hf:",
             dir, " takes block_size=N only (the sequence length to train at; the rest is the folder's config.json)");
    const std::string value = item.substr(eq + 1);
    int64_t parsed = 0;
    size_t used = 0;
    try {
      parsed = std::stoll(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    ZT_CHECK(used == value.size() && parsed > 0 && parsed <= c.max_positions, UsageError, "--model_config block_size=",
             value, ": give a positive integer up to the model's ",
             family_of(c).max_positions_key, " (", c.max_positions, ")");
    block = parsed;
  }
  return block;
}

void check_data(const std::string& dir, const HfModelConfig& c, const DataShape& data) {
  ZT_CHECK(data.kind != DataShape::Kind::kImages, UsageError, "--model hf:", dir, " is a language model and does not "
           "train on images (", data.name, "): give a text dataset");
  ZT_CHECK(data.kind != DataShape::Kind::kText || data.vocab_size <= c.vocab_size, UsageError, data.name, " has ",
           data.vocab_size, " token ids but --model hf:", dir, " a vocabulary of ", c.vocab_size,
           ": tokenize the text with the model's tokenizer");
}

std::string describe_model(const std::string& dir, const HfModelConfig& c) {
  std::string heads = std::to_string(c.num_heads) + " heads";
  if (c.num_kv_heads != c.num_heads) heads += " / " + std::to_string(c.num_kv_heads) + " kv heads";
  return detail::str(c.model_type, " (hf:", dir, ": ", c.num_layers, " layers, hidden ", c.hidden_size, ", ", heads,
                     ", vocab ", c.vocab_size, ")");
}

Fields fields_of(const HfModelConfig& c, int64_t block) {
  return {{"vocab_size", c.vocab_size}, {"block_size", block},         {"n_layer", c.num_layers},
          {"hidden_size", c.hidden_size}, {"n_head", c.num_heads},     {"n_kv_head", c.num_kv_heads}};
}

// The folder's files a saved model carries besides its weights: its config, and its
// tokenizer's (text/tokenizer.h), whichever the folder has.
std::vector<std::string> folder_file_names() {
  std::vector<std::string> names = {"config.json", "generation_config.json"};
  names.insert(names.end(), std::begin(text::kTokenizerFiles), std::end(text::kTokenizerFiles));
  return names;
}

class HfModel final : public Model {
 public:
  HfModel(const std::string& dir, const HfModelConfig& c, int64_t block)
      : dir_(dir), description_(describe_model(dir, c)), fields_(fields_of(c, block)), module_(load_hf_module(dir, c)) {}
  // Written back as a folder of the same model: its files, each parameter under the name
  // it was read from.
  std::optional<HfExport> hf_export() const override {
    HfExport out;
    for (const std::string& name : folder_file_names()) {
      std::error_code ec;
      const std::filesystem::path path = std::filesystem::path(dir_) / name;
      if (std::filesystem::is_regular_file(path, ec)) out.files.push_back(path);
    }
    out.tensor_name = folder_name;
    return out;
  }
  std::shared_ptr<torch::nn::Module> module() override { return module_; }
  // Targets of -100 are not trained (cross_entropy's ignore_index, transformers' convention):
  // the mean over the trained ones. A micro-batch of prompt tokens only (a prompt longer than
  // a block) trains nothing and has loss 0, where the plain mean would be 0/0 and its NaN
  // gradient would reach every rank's weights.
  at::Tensor loss(const at::Tensor& inputs, const at::Tensor& targets) override {
    const at::Tensor flat = targets.reshape({-1});
    const at::Tensor sum = at::cross_entropy_loss(flat_logits(inputs), flat, {}, at::Reduction::Sum);
    return sum / flat.ne(-100).sum().clamp_min(1).to(sum.scalar_type());
  }
  EvalSums eval_sums(const at::Tensor& inputs, const at::Tensor& targets) override {
    const at::Tensor flat = targets.reshape({-1});
    const auto sum = at::cross_entropy_loss(flat_logits(inputs), flat, {}, at::Reduction::Sum);
    return {sum.item<double>(), flat.ne(-100).sum().item<int64_t>(), 0};
  }
  EvalMetric eval_metric() const override { return EvalMetric::kPerplexity; }
  std::string describe() const override { return description_; }
  std::pair<int64_t, int64_t> data_dims() const override { return {fields_.at("vocab_size"), fields_.at("block_size")}; }
  std::string kind() const override { return "hf"; }
  const Fields& fields() const override { return fields_; }
  int64_t hidden_size() const override { return fields_.at("hidden_size"); }
  void enable_gradient_checkpointing(const activation::CheckpointOptions& options) override {
    activation::CheckpointOptions o = options;
    if (!o.number_checkpoints) o.number_checkpoints = fields_.at("n_layer");   // one segment per block
    module_->checkpointer.emplace(o);
  }

 private:
  // fp32 logits whatever the model's dtype, one row per token.
  at::Tensor flat_logits(const at::Tensor& inputs) {
    const at::Tensor logits = module_->forward(inputs);
    return logits.reshape({-1, logits.size(-1)}).to(at::kFloat);
  }
  std::string dir_;
  std::string description_;
  Fields fields_;
  std::shared_ptr<HfCausalLm> module_;
};

}  // namespace

std::unique_ptr<Model> make_hf_model(const std::string& dir, const std::string& config, const DataShape& data) {
  const HfModelConfig c = read_hf_config(dir);
  const int64_t block = block_size_of(dir, config, c);
  check_data(dir, c, data);
  if (!c.unapplied_dropout.empty() && env::get_int("RANK").value_or(0) == 0) {
    std::vector<std::string> fields;
    for (const auto& [field, p] : c.unapplied_dropout) fields.push_back(detail::str(field, " ", p));
    ZT_LOG_WARN("hf:", dir, ": config.json asks for dropout (", strings::join_words(fields, " and "),
                ") that zerotrain's models do not apply: they train as transformers computes in eval mode "
                "(docs/finetune.md); set those fields to 0.0 to silence this");
  }
  return std::make_unique<HfModel>(dir, c, block);
}

int64_t hf_block_size_of(const std::string& dir, const std::string& config) {
  return block_size_of(dir, config, read_hf_config(dir));
}

estimate::ModelShape hf_shape_of(const std::string& dir, const std::string& config, const DataShape& data) {
  const HfModelConfig c = read_hf_config(dir);
  const int64_t block = block_size_of(dir, config, c);
  check_data(dir, c, data);
  estimate::ModelShape s;
  s.name = describe_model(dir, c);
  std::map<std::string, int64_t> per_module;   // DeepSpeed's largest_layer_params: a module's own parameters
  for (const HfParam& p : hf_params(c)) {
    s.param_numels.push_back(p.numel());
    s.param_units.push_back(p.unit);
    per_module[p.module()] += p.numel();
  }
  for (const auto& [module, numel] : per_module) s.largest_layer_params = std::max(s.largest_layer_params, numel);
  // What the activation estimate needs (estimate/detailed.cpp counts what the family's
  // modules keep for backward).
  s.decoder = family_of(c).decoder_dims(c, block);
  return s;
}

int64_t hf_hidden_size_of(const std::string& dir) { return read_hf_config(dir).hidden_size; }

}  // namespace zerotrain::models::hf
