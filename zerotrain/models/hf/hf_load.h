// Loading a Hugging Face folder's weights into the module built from its config.json.
// Every parameter is matched to its tensor by name (the parameter's name without the Sharded
// wrappers' ".module"), and the folder is checked first, before anything is built: a missing
// tensor, a weight the model does not have, a shape or a dtype that does not fit is a
// ConfigError naming the tensor, its file and what to do.
//
// Without ZeroInit (stages 0-2) each parameter is read whole. Under an active ZeroInit (stage
// 3) each rank reads only its chunk of each unit's parameters (comm::chunk_range of the flat
// row-major elements: one pread of those bytes per parameter, in blocks), through the
// ChunkSource of stages/stage3/preshard.h, so the model is never whole on any rank and no rank
// reads more than its share of the units; what no unit owns (GPT-2's wpe, the final norm) is
// read whole by every rank. docs/finetune.md.
#pragma once

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "zerotrain/core/input_file.h"
#include "zerotrain/models/hf/hf_config.h"
#include "zerotrain/models/hf/hf_modules.h"
#include "zerotrain/models/hf/hf_weights.h"

namespace zerotrain::models::hf {

// The folder's weights, checked against the parameters `config` gives the model.
class HfReader {
 public:
  // Throws ConfigError for a missing, unexpected, misshapen or non-floating tensor;
  // CheckpointError for a damaged safetensors file. A buffer an older save holds (GPT-2's
  // attn.bias masks, rotary_emb.inv_freq) and lm_head.weight beside a tied head are warned
  // about and left unread, as transformers leaves them.
  HfReader(const std::filesystem::path& dir, const HfModelConfig& config);

  // Elements [offset, offset + numel) of parameter `name`'s flat row-major elements into
  // `out` (contiguous, numel elements, any floating dtype and device), converted as
  // at::Tensor::to converts (F32, BF16 and F16 in the file).
  void read(const std::string& name, int64_t offset, int64_t numel, const at::Tensor& out);

 private:
  std::filesystem::path dir_;
  HfWeights weights_;
  std::map<std::string, const HfTensorLocation*> located_;   // parameter name -> its tensor
  std::map<std::filesystem::path, std::unique_ptr<files::InputFile>> open_;
};

// LibTorch's dtype of a safetensors dtype (every one the format has).
at::ScalarType scalar_type_of(checkpoint::Dtype dtype);

// Elements [offset, offset + numel) of the flat row-major tensor at `where` (in `file`) into
// `out` (contiguous, numel elements, any dtype and device), converted as at::Tensor::copy_
// converts: straight into `out` when it is a host tensor of the file's dtype, else through
// a bounded buffer. Throws UsageError for a range outside the tensor or a mismatched `out`.
void read_elements(const files::InputFile& file, const HfTensorLocation& where, int64_t offset, int64_t numel,
                   const at::Tensor& out);

// Builds the module of the folder `dir` (whose config.json gave `config`) and loads its
// weights, whole or, under an active ZeroInit of this thread, each rank its chunks only.
std::shared_ptr<HfCausalLm> load_hf_module(const std::filesystem::path& dir, const HfModelConfig& config);

// A parameter's name in the folder: its module name without the ".module" segments the
// zerotrain::Sharded wrappers add.
std::string folder_name(const std::string& module_name);

}  // namespace zerotrain::models::hf
