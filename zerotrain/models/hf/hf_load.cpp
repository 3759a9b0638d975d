#include "zerotrain/models/hf/hf_load.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <set>
#include <unordered_set>

#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"
#include "zerotrain/core/strings.h"
#include "zerotrain/models/hf/families.h"
#include "zerotrain/models/hf/hf_layout.h"
#include "zerotrain/stages/stage3/preshard.h"

namespace zerotrain::models::hf {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Tensors of older saves that are not parameters, which transformers ignores too: the
// family's (GPT-2's attn.bias masks), rotary inverse frequencies, a tied head's weight.
bool ignorable(const std::string& name, const HfModelConfig& config) {
  for (const std::string& tail : family_of(config).ignorable_suffixes) {
    if (ends_with(name, tail)) return true;
  }
  if (ends_with(name, "rotary_emb.inv_freq")) return true;
  return name == "lm_head.weight" && config.tie_word_embeddings;
}

std::string model_words(const HfModelConfig& c) {
  return detail::str(c.model_type, ", ", c.num_layers, " layers, hidden ", c.hidden_size, ", vocab ", c.vocab_size,
                     c.tie_word_embeddings ? ", head tied" : "");
}

// Elements per read: the transient buffer of a read stays small whatever the tensor's size.
constexpr int64_t kBlockElements = int64_t{1} << 22;

}  // namespace

std::string folder_name(const std::string& module_name) {
  std::string out = module_name;
  for (size_t at = out.find(".module."); at != std::string::npos; at = out.find(".module.")) out.erase(at, 7);
  if (out.rfind("module.", 0) == 0) out.erase(0, 7);
  return out;
}

HfReader::HfReader(const std::filesystem::path& dir, const HfModelConfig& config)
    : dir_(dir), weights_(HfWeights::open(dir)) {
  const std::string prefix = base_model_prefix(config);
  std::set<std::string> used;
  for (const HfParam& p : hf_params(config)) {
    std::string stored = p.name;
    const HfTensorLocation* found = weights_.find(stored);
    if (!found && p.name.rfind(prefix, 0) == 0) {
      // A folder saved from the base model (GPT2Model, LlamaModel) names its tensors without it.
      stored = p.name.substr(prefix.size());
      found = weights_.find(stored);
    }
    ZT_CHECK(found != nullptr, ConfigError, dir.string(), ": the weights have no tensor ", p.name, ", which the model "
             "config.json describes (", model_words(config), ") needs; config.json and the weights must be of one "
             "model (save both with save_pretrained)");
    const std::string file = found->file.string();
    ZT_CHECK(found->entry.shape == p.shape, ConfigError, file, ": tensor ", stored, " has shape ",
             shape_text(found->entry.shape), " but config.json (", model_words(config), ") makes it ",
             shape_text(p.shape), "; config.json and the weights must be of one model (save both with save_pretrained)");
    ZT_CHECK(at::isFloatingType(scalar_type_of(found->entry.dtype)), ConfigError, file, ": tensor ", stored,
             " is ", checkpoint::dtype_tag(found->entry.dtype), "; a weight must be floating point (F32, BF16, F16 "
             "or F64): convert the model with transformers (model.to(torch.float32).save_pretrained(dir))");
    located_[p.name] = found;
    used.insert(stored);
  }
  for (const std::string& name : weights_.names()) {
    if (used.count(name)) continue;
    const std::string file = weights_.at(name).file.string();
    if (ignorable(name, config)) {
      ZT_LOG_WARN(file, ": tensor ", name, " is not a parameter of the model (", model_words(config),
                  "); it is not read");
      continue;
    }
    throw ConfigError(detail::str(file, ": tensor ", name, " is not a parameter of the model config.json describes (",
                                  model_words(config), "); config.json and the weights must be of one model (save "
                                  "both with save_pretrained)"));
  }
}

at::ScalarType scalar_type_of(checkpoint::Dtype dtype) {
  switch (dtype) {
    case checkpoint::Dtype::kF32: return at::kFloat;
    case checkpoint::Dtype::kBF16: return at::kBFloat16;
    case checkpoint::Dtype::kF16: return at::kHalf;
    case checkpoint::Dtype::kF64: return at::kDouble;
    case checkpoint::Dtype::kBool: return at::kBool;
    case checkpoint::Dtype::kU8: return at::kByte;
    case checkpoint::Dtype::kI8: return at::kChar;
    case checkpoint::Dtype::kI16: return at::kShort;
    case checkpoint::Dtype::kI32: return at::kInt;
    case checkpoint::Dtype::kI64: return at::kLong;
  }
  return at::ScalarType::Undefined;
}

void read_elements(const files::InputFile& file, const HfTensorLocation& where, int64_t offset, int64_t numel,
                   const at::Tensor& out) {
  ZT_CHECK(offset >= 0 && numel >= 0 && offset + numel <= where.entry.numel(), UsageError, "elements [", offset, ", ",
           offset + numel, ") of ", where.entry.name, " in ", where.file.string(), ": the tensor has ",
           where.entry.numel());
  ZT_CHECK(out.numel() == numel && out.is_contiguous(), UsageError, "reading ", numel, " elements of ",
           where.entry.name, " needs a contiguous tensor of as many elements, not one of ", out.numel(),
           out.is_contiguous() ? "" : " (not contiguous)");
  const at::ScalarType stored = scalar_type_of(where.entry.dtype);
  const int64_t element = checkpoint::dtype_size(where.entry.dtype);
  c10::NoGradGuard no_grad;
  const at::Tensor flat = out.view(-1);
  // Straight into `out` when it is a host tensor of the file's dtype; else through a small
  // buffer, converted by copy_ (LibTorch's rounding, as .to() gives).
  const bool direct = out.device().is_cpu() && out.scalar_type() == stored;
  at::Tensor buffer;
  if (!direct) buffer = at::empty({std::min(numel, kBlockElements)}, at::TensorOptions().dtype(stored));
  for (int64_t done = 0; done < numel;) {
    const int64_t n = direct ? numel : std::min(numel - done, kBlockElements);
    const at::Tensor target = direct ? flat : buffer.narrow(0, 0, n);
    file.read_at(where.file_offset + (offset + done) * element, target.data_ptr(), n * element);
    if (!direct) flat.narrow(0, done, n).copy_(target);
    done += n;
  }
}

void HfReader::read(const std::string& name, int64_t offset, int64_t numel, const at::Tensor& out) {
  const auto it = located_.find(name);
  ZT_INTERNAL_ASSERT(it != located_.end(), "the HF loader was asked for ", name, ", which the layout does not have");
  const HfTensorLocation& where = *it->second;
  auto& file = open_[where.file];
  if (!file) file = std::make_unique<files::InputFile>(where.file, files::InputFileOptions{.what = "safetensors file"});
  read_elements(*file, where, offset, numel, out);
}

std::shared_ptr<HfCausalLm> load_hf_module(const std::filesystem::path& dir, const HfModelConfig& config) {
  HfReader reader(dir, config);   // every check, before anything is built
  ParamMaker make;
  std::unordered_set<const void*> from_chunks;
  std::shared_ptr<HfCausalLm> module;
  {
    // Under ZeroInit each unit asks for this rank's chunks as it is built; without one, no
    // unit asks and the source is never called.
    stages::stage3::ChunkSourceScope source(
        [&](const at::Tensor& param, int64_t offset, int64_t numel, at::Tensor& chunk) {
          const std::string* name = make.name_of(param);
          ZT_INTERNAL_ASSERT(name != nullptr, "a unit of the HF model holds a parameter it did not make");
          reader.read(*name, offset, numel, chunk);
          from_chunks.insert(param.unsafeGetTensorImpl());
        });
    module = family_of(config).build(config, make);
  }
  // The rest whole: every parameter at stages 0-2, what no unit owns at stage 3.
  std::unordered_set<const void*> seen;
  for (const auto& item : module->named_parameters()) {
    const at::Tensor& p = item.value();
    if (!seen.insert(p.unsafeGetTensorImpl()).second || from_chunks.count(p.unsafeGetTensorImpl())) continue;
    const std::string name = folder_name(item.key());
    const std::string* made = make.name_of(p);
    ZT_INTERNAL_ASSERT(made != nullptr && *made == name, "the HF model's parameter ", item.key(),
                       " is not the tensor it was made for (", made ? *made : std::string("none"), ")");
    reader.read(name, 0, p.numel(), p.detach());
  }
  return module;
}

}  // namespace zerotrain::models::hf
