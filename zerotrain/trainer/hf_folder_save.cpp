// The Trainer's Hugging Face model folders: a model built from one (--model hf:DIR) is written
// back as one, every --save_hf_steps steps into <output_dir>/hf-<step>/ and at the end into
// <output_dir> (what run_clm's trainer.save_model() leaves there). The weights stream through
// the engine's save_16bit_model (one unit gathered at a time at stage 3, whatever
// "stage3_gather_16bit_weights_on_model_save" says: the user asked for the folder), under the
// folder's own tensor names; config.json and the tokenizer's files go beside them.
#include <filesystem>
#include <map>

#include "zerotrain/core/error.h"
#include "zerotrain/core/input_file.h"
#include "zerotrain/core/strings.h"
#include "zerotrain/trainer/trainer_impl.h"

namespace zerotrain {
namespace {

namespace fs = std::filesystem;

// The folder's files besides the weights: the model's own (config.json, its tokenizer files),
// then the caller's, which replace the model's of the same name (a --tokenizer from
// elsewhere). Read on rank 0 only; a file that cannot be read fails the save on every rank.
std::vector<std::pair<std::string, std::string>> folder_files(const models::HfExport& hf,
                                                              const std::vector<fs::path>& extra) {
  std::map<std::string, std::string> by_name(hf.files.begin(), hf.files.end());
  for (const fs::path& path : extra) {
    files::InputFile file(path, {.what = "tokenizer file"});
    by_name[path.filename().string()] = file.read_all();
  }
  return {by_name.begin(), by_name.end()};
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
      options.extra_files = folder_files(*hf, this->options.hf_extra_files);
    } catch (const Error& e) {
      options.caller_error = e.what();
    }
  }
  engine->save_16bit_model(dir.string(), "model.safetensors", options);
  if (is_rank0()) log->say("zerotrain train: wrote the model as a Hugging Face folder: " + dir.string());
}

}  // namespace zerotrain
