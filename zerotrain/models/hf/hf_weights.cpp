#include "zerotrain/models/hf/hf_weights.h"

#include "zerotrain/config/json_text.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/input_file.h"

namespace zerotrain::models::hf {
namespace {

namespace fs = std::filesystem;
constexpr const char* kSingle = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";
// Formats transformers also reads whose tensors cannot be read in part (pickles, other frameworks).
constexpr const char* kPickled[] = {"pytorch_model.bin", "pytorch_model.bin.index.json", "tf_model.h5",
                                    "flax_model.msgpack"};

checkpoint::SafetensorsHeader read_header(const files::InputFile& file) {
  const std::string name = file.path().string();
  unsigned char length[8] = {};
  if (file.size() >= 8) file.read_at(0, length, 8);
  const int64_t n = checkpoint::safetensors_header_length(length, file.size(), name);
  std::string header(static_cast<size_t>(n), '\0');
  file.read_at(8, header.data(), n);
  return checkpoint::parse_safetensors_header(header, file.size(), name);
}

// The shard a name maps to: a plain file name in the folder (a path that leaves it is refused).
fs::path shard_path(const fs::path& dir, const std::string& index_name, const std::string& tensor,
                    const config::Json& value) {
  ZT_CHECK(value.is_string(), ConfigError, index_name, ": weight_map[\"", tensor, "\"]: expected a file name, got ",
           value.dump());
  const std::string file = value.get<std::string>();
  ZT_CHECK(!file.empty() && file.find('/') == std::string::npos && file != "." && file != "..", ConfigError,
           index_name, ": weight_map[\"", tensor, "\"]: \"", file, "\" is not a file of the folder (a shard is named "
           "by its file name alone)");
  return dir / file;
}

}  // namespace

std::string with_variant(const std::string& name, const std::string& variant) {
  if (variant.empty()) return name;
  const size_t last = name.rfind('.');
  return name.substr(0, last) + "." + variant + name.substr(last);
}

HfWeights HfWeights::open(const fs::path& dir, const HfWeightsOptions& options) {
  HfWeights w;
  w.dir_ = dir;
  std::error_code ec;
  const std::string single = with_variant(kSingle, options.variant);
  const std::string index_file = with_variant(kIndex, options.variant);
  std::map<fs::path, std::vector<std::string>> wanted;   // shard -> the names the index puts there
  if (fs::exists(dir / index_file, ec)) {
    const fs::path index_path = dir / index_file;
    const std::string index_name = index_path.string();
    const config::Json index = config::read_json_file(index_path);
    ZT_CHECK(index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(), ConfigError,
             index_name, ": no \"weight_map\" object (an index written by save_pretrained maps each tensor to a file)");
    for (const auto& [tensor, value] : index["weight_map"].items()) {
      wanted[shard_path(dir, index_name, tensor, value)].push_back(tensor);
    }
    ZT_CHECK(!wanted.empty(), ConfigError, index_name, ": the weight_map names no tensor");
  } else if (fs::exists(dir / single, ec)) {
    wanted[dir / single];   // every tensor of the file
  } else {
    for (const char* pickled : kPickled) {
      ZT_CHECK(!fs::exists(dir / with_variant(pickled, options.variant), ec), NotSupported, dir.string(),
               " holds its weights as ", with_variant(pickled, options.variant), ", which cannot be read in part; "
               "zerotrain reads each rank's share from safetensors files: save the model once with "
               "save_pretrained(dir) (safetensors is its default) and load that folder");
    }
    throw IoError(detail::str(dir.string(), ": no ", single, " or ", index_file, "; save the model with "
                                  "save_pretrained (safetensors is its default; pytorch_model.bin is not read)"));
  }
  for (const auto& [path, names] : wanted) {
    const files::InputFile file(path, {.what = "safetensors file"});
    const checkpoint::SafetensorsHeader header = read_header(file);
    const auto format = header.metadata.find("format");
    ZT_CHECK(format == header.metadata.end() || format->second == "pt", NotSupported, path.string(), " holds ",
             format->second, " weights (its metadata's \"format\"); zerotrain reads PyTorch safetensors only: load it "
             "once with transformers and save_pretrained it");
    w.files_.push_back(path);
    auto add = [&](const checkpoint::TensorEntry& entry) {
      w.tensors_[entry.name] = {path, entry, header.data_offset + entry.begin};
    };
    if (names.empty()) {
      for (const auto& entry : header.tensors) add(entry);
      continue;
    }
    for (const auto& name : names) {
      const checkpoint::TensorEntry* entry = header.find(name);
      ZT_CHECK(entry != nullptr, ConfigError, (dir / index_file).string(), ": maps ", name, " to ", path.filename().string(),
               ", which does not hold it (a shard of another save?)");
      add(*entry);
    }
  }
  return w;
}

const HfTensorLocation* HfWeights::find(std::string_view name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const HfTensorLocation& HfWeights::at(std::string_view name) const {
  const HfTensorLocation* found = find(name);
  ZT_CHECK(found != nullptr, ConfigError, dir_.string(), ": the weights have no tensor ", name,
           " (is the folder's config.json the model its weights were saved from?)");
  return *found;
}

std::vector<std::string> HfWeights::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, location] : tensors_) out.push_back(name);
  return out;
}

}  // namespace zerotrain::models::hf
