// The Trainer's Hugging Face model folders: a model built from one (--model hf:DIR) is written
// back as one, every --save_hf_steps steps into <output_dir>/hf-<step>/ and at the end into
// <output_dir> (what run_clm's trainer.save_model() leaves there). The weights stream through
// the engine's save_16bit_model (one unit gathered at a time at stage 3, whatever
// "stage3_gather_16bit_weights_on_model_save" says: the user asked for the folder), under the
// folder's own tensor names; config.json and the tokenizer's files go beside them.
#include <algorithm>
#include <filesystem>
#include <iterator>

#include "zerotrain/core/error.h"
#include "zerotrain/core/input_file.h"
#include "zerotrain/core/strings.h"
#include "zerotrain/models/hf/hf_config.h"
#include "zerotrain/text/tokenizer.h"
#include "zerotrain/trainer/trainer_impl.h"

namespace zerotrain {
namespace {

namespace fs = std::filesystem;

// torch's name of a dtype without its "torch." (what transformers writes in config.json).
std::string transformers_dtype_name(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return "float32";
    case at::kBFloat16: return "bfloat16";
    case at::kHalf: return "float16";
    default: ZT_INTERNAL_ASSERT(false, "save_hf: weights in ", c10::toString(dtype));
  }
  return {};
}

// The folder's files besides the weights, read on the rank that writes: the model's own
// (config.json, its tokenizer's), or, when the caller gives a tokenizer's files (a --tokenizer
// from elsewhere), the model's config with those: never a mix of two tokenizers' files.
// config.json names the dtype the weights are saved in (the training dtype: bf16 or fp16
// weights under a config saying float32 would load upcast). A file that cannot be read fails
// the save on every rank (save_16bit_model's caller_error).
std::vector<std::pair<std::string, std::string>> folder_files(const models::HfExport& hf,
                                                              const std::vector<fs::path>& tokenizer,
                                                              at::ScalarType weights_dtype) {
  auto is_tokenizer_file = [](const fs::path& path) {
    return std::find(std::begin(text::kTokenizerFiles), std::end(text::kTokenizerFiles), path.filename().string()) !=
           std::end(text::kTokenizerFiles);
  };
  std::vector<fs::path> paths;
  for (const fs::path& path : hf.files) {
    if (tokenizer.empty() || !is_tokenizer_file(path)) paths.push_back(path);
  }
  paths.insert(paths.end(), tokenizer.begin(), tokenizer.end());
  std::vector<std::pair<std::string, std::string>> out;
  for (const fs::path& path : paths) {
    files::InputFile file(path, {.what = "model folder file"});
    std::string bytes = file.read_all();
    if (path.filename() == "config.json") {
      bytes = models::hf::config_text_for_dtype(bytes, transformers_dtype_name(weights_dtype), path.string());
    }
    out.emplace_back(path.filename().string(), std::move(bytes));
  }
  return out;
}

}  // namespace

void Trainer::Impl::save_hf(const fs::path& dir) {
  const std::optional<models::HfExport> hf = model->hf_export();
  ZT_INTERNAL_ASSERT(hf.has_value(), "save_hf: the model was not built from a Hugging Face folder");
  ModelSaveOptions options;
  options.max_shard_bytes = strings::parse_bytes(args.max_shard_size, "--max_shard_size");
  options.tensor_name = hf->tensor_name;
  options.gather_at_stage3 = true;
  if (is_rank0()) {
    try {
      options.extra_files = folder_files(*hf, this->options.hf_tokenizer_files, engine->model_dtype());
    } catch (const Error& e) {
      options.caller_error = e.what();
    }
  }
  engine->save_16bit_model(dir.string(), "model.safetensors", options);
  if (is_rank0()) log->say("zerotrain train: wrote the model as a Hugging Face folder: " + dir.string());
}

}  // namespace zerotrain
