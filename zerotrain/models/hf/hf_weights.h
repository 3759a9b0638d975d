// Where each tensor of a Hugging Face model folder's weights lies: in model.safetensors, or in
// the shards that model.safetensors.index.json maps each name to. Only the files' headers are
// read (and checked as any safetensors file: checkpoint/safetensors.h); a rank that builds its
// shard of a parameter then reads just that byte range. No LibTorch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "zerotrain/checkpoint/safetensors.h"

namespace zerotrain::models::hf {

struct HfTensorLocation {
  std::filesystem::path file;
  checkpoint::TensorEntry entry;   // dtype, shape, and byte range within the data section
  int64_t file_offset = 0;         // where its first byte is in the file
};

struct HfWeightsOptions {
  // transformers' `variant=`: "fp16" reads model.fp16.safetensors, or the shards that
  // model.safetensors.index.fp16.json lists. Empty: the plain names.
  std::string variant;
};

// A file name with transformers' variant inserted before its last suffix:
// model.safetensors -> model.fp16.safetensors, model.safetensors.index.json ->
// model.safetensors.index.fp16.json.
std::string with_variant(const std::string& name, const std::string& variant);

class HfWeights {
 public:
  // Throws IoError naming the folder when it has neither file; ConfigError when the index is
  // not one (a name mapped to no file, a file outside the folder, a name its shard does not hold);
  // NotSupported when the folder holds only pickled weights (pytorch_model.bin), which cannot
  // be read in part, or safetensors of another framework's layout (metadata format not "pt");
  // CheckpointError naming the file when a safetensors header is damaged.
  static HfWeights open(const std::filesystem::path& dir, const HfWeightsOptions& options = {});

  const HfTensorLocation* find(std::string_view name) const;
  // ConfigError naming the tensor and the folder when it is absent.
  const HfTensorLocation& at(std::string_view name) const;
  std::vector<std::string> names() const;                          // sorted
  const std::vector<std::filesystem::path>& files() const { return files_; }   // in the order read

 private:
  std::filesystem::path dir_;
  std::vector<std::filesystem::path> files_;
  std::map<std::string, HfTensorLocation, std::less<>> tensors_;
};

}  // namespace zerotrain::models::hf
