// Where a Hugging Face folder's tensors lie (models/hf/hf_weights.h): one model.safetensors,
// shards with model.safetensors.index.json, transformers' variants, and each class of broken
// folder.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "zerotrain/checkpoint/safetensors.h"
#include "zerotrain/core/error.h"
#include "zerotrain/models/hf/hf_weights.h"

namespace fs = std::filesystem;
namespace ck = zerotrain::checkpoint;
namespace hf = zerotrain::models::hf;

namespace {

struct Folder {
  fs::path path;
  explicit Folder(const std::string& name) : path(fs::temp_directory_path() / ("zerotrain_hf_weights_" + name)) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Folder() { fs::remove_all(path); }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path / name, std::ios::binary) << bytes;
  }
};

// A safetensors file of float tensors; tensor i holds the values base + i, base + i + 1, ...
std::string safetensors(const std::vector<std::pair<std::string, std::vector<int64_t>>>& shapes, float base) {
  std::vector<ck::TensorEntry> entries;
  for (const auto& [name, shape] : shapes) entries.push_back({.name = name, .dtype = ck::Dtype::kF32, .shape = shape});
  std::string bytes = ck::encode_safetensors_header(entries);
  for (size_t i = 0; i < entries.size(); ++i) {
    for (int64_t k = 0; k < entries[i].numel(); ++k) {
      const float value = base + static_cast<float>(i + k);
      bytes.append(reinterpret_cast<const char*>(&value), sizeof value);
    }
  }
  return bytes;
}

float first_value(const hf::HfTensorLocation& at) {
  std::ifstream in(at.file, std::ios::binary);
  in.seekg(at.file_offset);
  float value = 0;
  in.read(reinterpret_cast<char*>(&value), sizeof value);
  return value;
}

template <class E>
std::string error_of(const fs::path& dir) {
  try {
    hf::HfWeights::open(dir);
  } catch (const E& e) {
    return e.what();
  }
  return "no error";
}

TEST(HfWeights, OneFileHoldsEveryTensor) {
  Folder f("single");
  f.write("model.safetensors", safetensors({{"wte.weight", {4, 2}}, {"ln_f.bias", {2}}}, 10));
  const auto w = hf::HfWeights::open(f.path);
  EXPECT_EQ(w.names(), (std::vector<std::string>{"ln_f.bias", "wte.weight"}));
  EXPECT_EQ(w.at("wte.weight").entry.shape, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(first_value(w.at("wte.weight")), 10.0f);   // the bytes are where it says
  EXPECT_EQ(first_value(w.at("ln_f.bias")), 11.0f);
  EXPECT_EQ(w.find("lm_head.weight"), nullptr);
  try {
    w.at("lm_head.weight");
    FAIL() << "no error";
  } catch (const zerotrain::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no tensor lm_head.weight"), std::string::npos) << e.what();
  }
}

TEST(HfWeights, ShardsThroughTheIndex) {
  Folder f("shards");
  f.write("model-00001-of-00002.safetensors", safetensors({{"a", {3}}, {"b", {2, 2}}}, 0));
  f.write("model-00002-of-00002.safetensors", safetensors({{"c", {5}}}, 100));
  f.write("model.safetensors.index.json", R"({"metadata": {"total_size": 48}, "weight_map": {
      "a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
      "c": "model-00002-of-00002.safetensors"}})");
  const auto w = hf::HfWeights::open(f.path);
  EXPECT_EQ(w.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(w.files().size(), 2u);
  EXPECT_EQ(w.at("c").file.filename(), "model-00002-of-00002.safetensors");
  EXPECT_EQ(first_value(w.at("c")), 100.0f);
  EXPECT_EQ(first_value(w.at("b")), 1.0f);
}

TEST(HfWeights, EachBrokenFolderSaysWhatIsWrong) {
  {
    Folder f("empty");
    EXPECT_NE(error_of<zerotrain::IoError>(f.path).find("no model.safetensors or model.safetensors.index.json"),
              std::string::npos);
  }
  {
    Folder f("no_weight_map");
    f.write("model.safetensors.index.json", R"({"metadata": {}})");
    EXPECT_NE(error_of<zerotrain::ConfigError>(f.path).find("no \"weight_map\""), std::string::npos);
  }
  {
    Folder f("escapes");
    f.write("model.safetensors.index.json", R"({"weight_map": {"a": "../model.safetensors"}})");
    EXPECT_NE(error_of<zerotrain::ConfigError>(f.path).find("is not a file of the folder"), std::string::npos);
  }
  {
    Folder f("not_held");
    f.write("shard.safetensors", safetensors({{"a", {1}}}, 0));
    f.write("model.safetensors.index.json", R"({"weight_map": {"a": "shard.safetensors", "b": "shard.safetensors"}})");
    EXPECT_NE(error_of<zerotrain::ConfigError>(f.path).find("maps b to shard.safetensors, which does not hold it"),
              std::string::npos);
  }
  {
    Folder f("missing_shard");
    f.write("model.safetensors.index.json", R"({"weight_map": {"a": "gone.safetensors"}})");
    EXPECT_NE(error_of<zerotrain::IoError>(f.path).find("gone.safetensors"), std::string::npos);
  }
  {
    Folder f("truncated");
    const std::string whole = safetensors({{"a", {4}}}, 0);
    f.write("model.safetensors", whole.substr(0, whole.size() - 4));
    EXPECT_NE(error_of<zerotrain::CheckpointError>(f.path).find("model.safetensors"), std::string::npos);
  }
  {
    Folder f("not_safetensors");
    f.write("model.safetensors", "PK\x03\x04 a zip, as pytorch_model.bin is");
    EXPECT_NE(error_of<zerotrain::CheckpointError>(f.path).find("does not fit the file"), std::string::npos);
  }
}

TEST(HfWeights, AVariantNamesItsFilesAsTransformersDoes) {
  EXPECT_EQ(hf::with_variant("model.safetensors", "fp16"), "model.fp16.safetensors");
  EXPECT_EQ(hf::with_variant("model.safetensors.index.json", "fp16"), "model.safetensors.index.fp16.json");
  EXPECT_EQ(hf::with_variant("model.safetensors", ""), "model.safetensors");
  Folder f("variant");
  f.write("model.fp16.safetensors", safetensors({{"a", {2}}}, 7));
  EXPECT_NE(error_of<zerotrain::IoError>(f.path).find("no model.safetensors"), std::string::npos);
  const hf::HfWeights w = hf::HfWeights::open(f.path, {.variant = "fp16"});
  EXPECT_EQ(first_value(w.at("a")), 7.0f);
  f.write("model-00001-of-00001.safetensors", safetensors({{"b", {1}}}, 3));
  f.write("model.safetensors.index.bf16.json", R"({"weight_map": {"b": "model-00001-of-00001.safetensors"}})");
  EXPECT_EQ(first_value(hf::HfWeights::open(f.path, {.variant = "bf16"}).at("b")), 3.0f);
}

TEST(HfWeights, WeightsThatCannotBeReadInPartAreNotSupported) {
  {
    Folder f("pickled");
    f.write("pytorch_model.bin", "PK\x03\x04");
    EXPECT_NE(error_of<zerotrain::NotSupported>(f.path).find("pytorch_model.bin, which cannot be read in part"),
              std::string::npos);
  }
  {
    Folder f("tensorflow");
    std::vector<ck::TensorEntry> entries{{.name = "w", .dtype = ck::Dtype::kF32, .shape = {1}}};
    std::string bytes = ck::encode_safetensors_header(entries, {{"format", "tf"}});
    bytes.append(4, '\0');
    f.write("model.safetensors", bytes);
    EXPECT_NE(error_of<zerotrain::NotSupported>(f.path).find("holds tf weights"), std::string::npos);
  }
}

}  // namespace
