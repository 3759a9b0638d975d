// A Hugging Face model folder's config.json (models/hf/hf_config.h): the configs transformers
// writes for GPT-2, Llama, Mistral and Qwen2 (as transformers 5 saves them, and the older
// spelling of the rotary fields that hub folders have), and every class of bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "zerotrain/core/error.h"
#include "zerotrain/models/hf/families.h"
#include "zerotrain/models/hf/hf_config.h"

namespace hf = zerotrain::models::hf;
using zerotrain::config::Json;

namespace {

hf::HfModelConfig parse(const std::string& text) {
  return hf::parse_hf_config(Json::parse(text), "model/config.json");
}

// The error a config gives, or "" when it parses.
std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const zerotrain::ConfigError& e) {
    return e.what();
  }
  return "";
}

// GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=100, n_positions=64).to_dict(), trimmed
// of what does not matter to the model.
const char* kGpt2 = R"({"activation_function": "gelu_new", "add_cross_attention": false, "bos_token_id": 50256,
  "eos_token_id": 50256, "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_embd": 32, "n_head": 2,
  "n_inner": null, "n_layer": 2, "n_positions": 64, "reorder_and_upcast_attn": false, "resid_pdrop": 0.1,
  "scale_attn_by_inverse_layer_idx": false, "scale_attn_weights": true, "tie_word_embeddings": true,
  "transformers_version": "5.24.0", "vocab_size": 100})";

// LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
// num_key_value_heads=2, vocab_size=100, max_position_embeddings=64) as transformers 5 writes it.
const char* kLlama = R"({"attention_bias": false, "bos_token_id": 1, "eos_token_id": 2, "head_dim": 8,
  "hidden_act": "silu", "hidden_size": 32, "intermediate_size": 64, "max_position_embeddings": 64, "mlp_bias": false,
  "model_type": "llama", "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
  "pretraining_tp": 1, "rms_norm_eps": 1e-06, "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
  "tie_word_embeddings": false, "vocab_size": 100})";

std::string with(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

// The C++ models apply no dropout: what the config asks for above 0 is collected, for the
// warning, with GPT-2's defaults (0.1) where a field is absent.
TEST(HfConfig, DropoutTheModelsDoNotApplyIsListed) {
  using Listed = std::vector<std::pair<std::string, double>>;
  EXPECT_EQ(parse(kGpt2).unapplied_dropout,
            (Listed{{"resid_pdrop", 0.1}, {"embd_pdrop", 0.1}, {"attn_pdrop", 0.1}}));
  EXPECT_EQ(parse(with(kGpt2, R"("resid_pdrop": 0.1)", R"("resid_pdrop": 0, "embd_pdrop": 0.0, "attn_pdrop": 0)"))
                .unapplied_dropout,
            Listed{});
  EXPECT_EQ(parse(kLlama).unapplied_dropout, Listed{});
  EXPECT_EQ(parse(with(kLlama, R"("attention_bias": false)", R"("attention_bias": false, "attention_dropout": 0.2)"))
                .unapplied_dropout,
            (Listed{{"attention_dropout", 0.2}}));
}

TEST(HfConfig, Gpt2AsTransformersWritesIt) {
  const auto c = parse(kGpt2);
  EXPECT_EQ(c.family, "gpt2");
  EXPECT_EQ(c.vocab_size, 100);
  EXPECT_EQ(c.hidden_size, 32);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 2);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.intermediate_size, 128);   // n_inner null: 4 x n_embd
  EXPECT_EQ(c.max_positions, 64);
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  EXPECT_EQ(c.activation, "gelu_new");
  EXPECT_TRUE(c.tie_word_embeddings && c.qkv_bias && c.out_bias && c.mlp_bias);
  EXPECT_EQ(c.eos_token_id, 50256);
}

TEST(HfConfig, LlamaMistralAndQwen2AsTransformersWritesThem) {
  const auto llama = parse(kLlama);
  EXPECT_EQ(llama.family, "llama");
  EXPECT_EQ(llama.num_heads, 4);
  EXPECT_EQ(llama.num_kv_heads, 2);
  EXPECT_EQ(llama.head_dim, 8);
  EXPECT_EQ(llama.intermediate_size, 64);
  EXPECT_DOUBLE_EQ(llama.norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(llama.rope_theta, 10000.0);
  EXPECT_EQ(llama.rope_scaling.type, "default");
  EXPECT_FALSE(llama.tie_word_embeddings || llama.qkv_bias || llama.out_bias || llama.mlp_bias);
  EXPECT_EQ(llama.eos_token_id, 2);

  const auto mistral = parse(with(with(kLlama, R"("model_type": "llama")", R"("model_type": "mistral")"),
                                  R"("mlp_bias": false,)", R"("sliding_window": 4096,)"));
  EXPECT_EQ(mistral.family, "llama");
  EXPECT_EQ(mistral.sliding_window, 4096);

  const auto qwen2 = parse(with(with(kLlama, R"("model_type": "llama")", R"("model_type": "qwen2")"),
                                R"("attention_bias": false,)", R"("use_sliding_window": false, "sliding_window": null,)"));
  EXPECT_TRUE(qwen2.qkv_bias);    // always, in Qwen2
  EXPECT_FALSE(qwen2.out_bias);
  EXPECT_FALSE(qwen2.sliding_window.has_value());
}

TEST(HfConfig, TheOlderRotaryFieldsAndLlama3Scaling) {
  // Hub folders saved before transformers 5: rope_theta and rope_scaling beside the rest;
  // Llama 3.1's scaling, and its list of end-of-text ids.
  const std::string old = with(with(kLlama, R"("rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"})",
                                    R"("rope_theta": 500000.0, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0,
                                        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
                                        "rope_type": "llama3"})"),
                               R"("eos_token_id": 2)", R"("eos_token_id": [128001, 128009])");
  const auto c = parse(old);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.eos_token_id, 128001);
  const auto linear = parse(with(kLlama, R"("rope_type": "default")", R"("rope_type": "linear", "factor": 2.0)"));
  EXPECT_EQ(linear.rope_scaling.type, "linear");
  EXPECT_DOUBLE_EQ(linear.rope_scaling.factor, 2.0);
  // No head_dim: hidden_size / num_attention_heads.
  EXPECT_EQ(parse(with(kLlama, R"("head_dim": 8,)", "")).head_dim, 8);
}

TEST(HfConfig, EachUnsupportedModelOrSettingNamesItsField) {
  struct Case {
    std::string text, wanted;
  };
  const Case cases[] = {
      {with(kGpt2, R"("model_type": "gpt2")", R"("model_type": "bert")"), "model_type: \"bert\" is not supported"},
      {with(kGpt2, R"("model_type": "gpt2",)", ""), "model_type: missing"},
      {with(kGpt2, R"("n_embd": 32,)", ""), "n_embd: missing"},
      {with(kGpt2, R"("n_head": 2)", R"("n_head": 3)"), "n_head: 3 does not divide n_embd 32"},
      {with(kGpt2, R"("n_layer": 2)", R"("n_layer": 0)"), "n_layer: must be at least 1, got 0"},
      {with(kGpt2, R"("vocab_size": 100)", R"("vocab_size": "100")"), "vocab_size: expected an integer"},
      {with(kGpt2, R"("activation_function": "gelu_new")", R"("activation_function": "swish")"),
       "activation_function: \"swish\" is not implemented"},
      {with(kGpt2, R"("scale_attn_by_inverse_layer_idx": false)", R"("scale_attn_by_inverse_layer_idx": true)"),
       "scale_attn_by_inverse_layer_idx: true is not implemented"},
      {with(kGpt2, R"("add_cross_attention": false)", R"("add_cross_attention": true)"), "add_cross_attention"},
      {with(kLlama, R"("hidden_act": "silu")", R"("hidden_act": "gelu")"), "hidden_act: \"gelu\" is not implemented"},
      {with(kLlama, R"("num_key_value_heads": 2)", R"("num_key_value_heads": 3)"),
       "num_key_value_heads: 3 does not divide num_attention_heads 4"},
      {with(kLlama, R"("rope_type": "default")", R"("rope_type": "yarn", "factor": 4.0)"),
       "rope_parameters.rope_type: \"yarn\" is not implemented"},
      {with(kLlama, R"("rope_type": "default")", R"("rope_type": "llama3", "factor": 8.0)"),
       "rope_parameters: a llama3 rope scaling needs"},
      {with(with(kLlama, R"("model_type": "llama")", R"("model_type": "qwen2")"), R"("mlp_bias": false,)",
            R"("use_sliding_window": true,)"),
       "use_sliding_window: true is not implemented"},
      {with(kLlama, R"("tie_word_embeddings": false)", R"("tie_word_embeddings": "no")"),
       "tie_word_embeddings: expected true or false"},
  };
  for (const auto& c : cases) {
    const std::string error = error_of(c.text);
    EXPECT_NE(error.find("model/config.json: "), std::string::npos) << error;
    EXPECT_NE(error.find(c.wanted), std::string::npos) << "want: " << c.wanted << "\ngot: " << error;
  }
  EXPECT_NE(std::string(error_of("[1, 2]")).find("expected a JSON object"), std::string::npos);
}

TEST(HfConfig, AFolderWithoutConfigJsonSaysWhatIsMissing) {
  const auto dir = std::filesystem::temp_directory_path() / "zerotrain_hf_config_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  try {
    hf::read_hf_config(dir);
    FAIL() << "no error";
  } catch (const zerotrain::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no config.json"), std::string::npos) << e.what();
  }
  std::ofstream(dir / "config.json") << kGpt2;
  EXPECT_EQ(hf::read_hf_config(dir).model_type, "gpt2");
  std::filesystem::remove_all(dir);
}

// A saved folder's config.json names the dtype of the weights beside it, under the key or keys
// the folder already uses (transformers 5's "dtype", the older "torch_dtype"), else "dtype".
TEST(HfConfig, ASavedConfigNamesTheDtypeOfItsWeights) {
  const auto saved = [](const std::string& text, const std::string& dtype) {
    return Json::parse(hf::config_text_for_dtype(text, dtype, "model/config.json"));
  };
  const std::string v5 = R"({"model_type": "gpt2", "dtype": "float32", "n_embd": 32})";
  EXPECT_EQ(hf::config_text_for_dtype(v5, "float32", "model/config.json"), v5) << "already right: byte for byte";
  Json got = saved(v5, "bfloat16");
  EXPECT_EQ(got["dtype"], "bfloat16");
  EXPECT_FALSE(got.contains("torch_dtype"));
  EXPECT_EQ(got["n_embd"], 32);
  EXPECT_EQ(got.begin().key(), "model_type") << "the file's key order is kept";

  got = saved(R"({"model_type": "llama", "torch_dtype": "float32"})", "float16");
  EXPECT_EQ(got["torch_dtype"], "float16");
  EXPECT_FALSE(got.contains("dtype")) << "the older key alone is updated, not joined by the new one";

  got = saved(R"({"model_type": "llama", "torch_dtype": "bfloat16", "dtype": "float32"})", "bfloat16");
  EXPECT_EQ(got["torch_dtype"], "bfloat16");
  EXPECT_EQ(got["dtype"], "bfloat16");

  got = saved(R"({"model_type": "llama"})", "bfloat16");
  EXPECT_EQ(got["dtype"], "bfloat16");

  for (const char* bad : {"[1, 2]", "{"}) {
    try {
      hf::config_text_for_dtype(bad, "float32", "model/config.json");
      FAIL() << "no error for " << bad;
    } catch (const zerotrain::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("model/config.json"), std::string::npos) << e.what();
    }
  }
}

}  // namespace

// The table of families (models/hf/families.h): each model_type is built by one family, whose
// name the config carries; one no family builds is refused with the list of those that are.
TEST(HfFamilies, EachModelTypeHasOneFamily) {
  std::vector<std::string> seen;
  for (const hf::FamilyDescriptor* family : hf::families()) {
    ASSERT_NE(family, nullptr);
    EXPECT_TRUE(family->read_config && family->params && family->decoder_dims && family->build) << family->name;
    for (const std::string& type : family->model_types) {
      EXPECT_EQ(std::count(seen.begin(), seen.end(), type), 0) << type;
      seen.push_back(type);
      EXPECT_EQ(&hf::family_of(type), family);
    }
  }
  // Another family adds its model_types to the list, in the table's order.
  EXPECT_EQ(hf::supported_model_types().rfind("gpt2, llama, mistral", 0), 0u) << hf::supported_model_types();
  EXPECT_EQ(hf::family_of("qwen2").name, "llama");
  EXPECT_EQ(hf::family_of("gpt2").max_positions_key, "n_positions");
  EXPECT_EQ(hf::find_family("bert"), nullptr);
  try {
    hf::family_of("bert");
    FAIL() << "no family builds bert";
  } catch (const zerotrain::ConfigError& e) {
    EXPECT_EQ(e.message(), "model_type \"bert\" is not supported; zerotrain builds " + hf::supported_model_types() +
                               " models from a folder");
  }
}
