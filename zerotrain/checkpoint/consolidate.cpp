#include "zerotrain/checkpoint/consolidate.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>
#include <set>
#include <unordered_map>

#include "zerotrain/checkpoint/file_io.h"
#include "zerotrain/checkpoint/float_convert.h"
#include "zerotrain/checkpoint/writer.h"
#include "zerotrain/core/error.h"

namespace zerotrain::checkpoint {
namespace {

namespace fs = std::filesystem;

// Conversions go through this much memory at a time, so a 16-bit output costs no second
// copy of the largest tensor.
constexpr int64_t kScratchBytes = 4 << 20;
// HF's metadata: `format` tells loaders the tensors came from PyTorch.
const std::map<std::string, std::string> kOutputMetadata{{"format", "pt"}};

std::string shard_name(size_t index, size_t count) {
  if (count == 1) return std::string(kConsolidatedName);
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return name;
}

// A file an earlier consolidation may have written here (or its temporary name after a crash).
bool consolidation_file(std::string name) {
  if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0) name.resize(name.size() - 4);
  if (name == kConsolidatedName || name == kConsolidatedIndexName) return true;
  const std::string_view shape = "model-#####-of-#####.safetensors";
  if (name.size() != shape.size()) return false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == '#' ? !std::isdigit(static_cast<unsigned char>(name[i])) : name[i] != shape[i]) return false;
  }
  return true;
}

std::string describe(const PlannedTensor& t) {
  switch (t.kind) {
    case PlannedTensor::Kind::kParam: return "parameter \"" + t.name + "\"";
    case PlannedTensor::Kind::kFrozen: return "frozen parameter \"" + t.name + "\"";
    case PlannedTensor::Kind::kBuffer: return "buffer \"" + t.name + "\"";
  }
  return t.name;
}

// The keys a tensor is read from: (rank, key, bytes).
struct Piece {
  int rank;
  std::string key;
  int64_t offset_bytes;   // where it goes in the buffer
  int64_t nbytes;
};
std::vector<Piece> pieces_of(const Manifest& m, const PlannedTensor& t) {
  switch (t.kind) {
    case PlannedTensor::Kind::kParam: {
      std::vector<Piece> out;
      const ParamRecord& p = m.params[t.record];
      for (const Fragment& f : p.fragments) {
        out.push_back({f.rank, fragment_key("fp32", p.name, f), f.begin * 4, f.numel() * 4});
      }
      return out;
    }
    case PlannedTensor::Kind::kFrozen: return {{0, "frozen/" + t.name, 0, t.saved_nbytes()}};
    case PlannedTensor::Kind::kBuffer: return {{0, "buffer/" + t.name, 0, t.saved_nbytes()}};
  }
  return {};
}

// Every piece is in its rank file with the dtype and size the manifest implies, before
// anything is allocated or written: sizes then come from files that exist, not from the
// manifest alone.
void check_pieces(CheckpointReader& reader, const ConsolidationPlan& plan) {
  std::unordered_map<int, std::unordered_map<std::string_view, const TensorEntry*>> by_rank;
  for (const PlannedTensor& t : plan.tensors) {
    for (const Piece& p : pieces_of(reader.manifest(), t)) {
      auto [it, fresh] = by_rank.try_emplace(p.rank);
      if (fresh) {
        for (const TensorEntry& e : reader.header(p.rank).tensors) it->second.emplace(e.name, &e);
      }
      const std::string file = (reader.dir() / reader.manifest().files[static_cast<size_t>(p.rank)].name).string();
      auto found = it->second.find(p.key);
      ZT_CHECK(found != it->second.end(), CheckpointError, file, ": has no tensor \"", p.key, "\" of ", describe(t),
               " although the manifest names it (damaged, or a file from another save)");
      const TensorEntry& e = *found->second;
      ZT_CHECK(e.dtype == t.saved && e.nbytes() == p.nbytes, CheckpointError, file, ": tensor \"", p.key, "\" is ",
               dtype_tag(e.dtype), " of ", e.nbytes(), " bytes; the manifest implies ", dtype_tag(t.saved), " of ",
               p.nbytes);
    }
  }
}

void write_tensor(AtomicFile& out, const PlannedTensor& t, const char* buffer, std::vector<char>& scratch) {
  if (t.saved == t.dtype) {
    out.write(buffer, t.nbytes());
    return;
  }
  const int64_t per_chunk = kScratchBytes / std::max(dtype_size(t.saved), dtype_size(t.dtype));
  if (scratch.empty()) scratch.resize(kScratchBytes);
  for (int64_t at = 0, numel = t.numel(); at < numel; at += per_chunk) {
    const int64_t n = std::min(per_chunk, numel - at);
    convert_floats(buffer + at * dtype_size(t.saved), t.saved, scratch.data(), t.dtype, n);
    out.write(scratch.data(), n * dtype_size(t.dtype));
  }
}

int64_t write_index(const fs::path& path, const ConsolidationPlan& plan) {
  nlohmann::json weight_map = nlohmann::json::object();   // sorted by name, as HF writes it
  for (const PlannedShard& s : plan.shards) {
    for (size_t i : s.tensors) weight_map[plan.tensors[i].name] = s.file;
  }
  const nlohmann::json index = {{"metadata", {{"total_size", plan.total_tensor_bytes}}}, {"weight_map", weight_map}};
  AtomicFile out(path);
  out.write(index.dump(2) + "\n");
  out.commit();
  return out.bytes_written();
}

}  // namespace

void read_planned_tensor(CheckpointReader& reader, const PlannedTensor& t, char* buffer) {
  for (const Piece& p : pieces_of(reader.manifest(), t)) {
    reader.read_tensor(p.rank, p.key, t.saved, buffer + p.offset_bytes, p.nbytes);
  }
}

void check_plan_pieces(CheckpointReader& reader, const ConsolidationPlan& plan) { check_pieces(reader, plan); }

int64_t PlannedTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

ConsolidationPlan plan_consolidation(const Manifest& m, const ConsolidateOptions& o, std::string_view file) {
  ZT_CHECK(o.dtype == Dtype::kF32 || o.dtype == Dtype::kBF16 || o.dtype == Dtype::kF16, UsageError,
           "consolidation writes parameters in F32, BF16 or F16, not ", dtype_tag(o.dtype));
  ZT_CHECK(o.max_shard_bytes >= 1, UsageError, "the largest shard must be at least 1 byte, got ", o.max_shard_bytes);
  ConsolidationPlan plan;
  std::set<std::string> names;
  auto add = [&](PlannedTensor::Kind kind, size_t record, const std::string& name, const std::vector<int64_t>& shape,
                 const std::string& saved_tag, bool converted) {
    PlannedTensor t{kind, record, name, shape};
    const auto saved = dtype_from_tag(saved_tag);
    ZT_CHECK(saved.has_value(), CheckpointError, file, ": ", describe(t), " has dtype \"", saved_tag,
             "\", which is not a safetensors dtype (a damaged or foreign manifest)");
    t.saved = *saved;
    t.dtype = converted && is_floating(t.saved) ? o.dtype : t.saved;
    ZT_CHECK(!name.empty() && name != "__metadata__", CheckpointError, file, ": ", describe(t),
             " cannot be a tensor name in a safetensors file");
    ZT_CHECK(names.insert(name).second, CheckpointError, file, ": \"", name,
             "\" names two tensors (parameters, frozen parameters and buffers share one namespace); the manifest is "
             "damaged");
    int64_t nbytes = 0, saved_nbytes = 0;
    ZT_CHECK(!__builtin_mul_overflow(t.numel(), dtype_size(t.dtype), &nbytes) &&
                 !__builtin_mul_overflow(t.numel(), dtype_size(t.saved), &saved_nbytes) &&
                 !__builtin_add_overflow(plan.total_tensor_bytes, nbytes, &plan.total_tensor_bytes),
             CheckpointError, file, ": ", describe(t), " is too large to address (a damaged manifest)");
    plan.buffer_bytes = std::max(plan.buffer_bytes, saved_nbytes);
    plan.tensors.push_back(std::move(t));
  };
  for (size_t i = 0; i < m.params.size(); ++i) add(PlannedTensor::Kind::kParam, i, m.params[i].name, m.params[i].shape, "F32", true);
  for (size_t i = 0; i < m.frozen.size(); ++i) add(PlannedTensor::Kind::kFrozen, i, m.frozen[i].name, m.frozen[i].shape, m.frozen[i].dtype, true);
  // Buffers keep their dtype: running statistics, step counts and masks are not weights to
  // round, and DeepSpeed's zero_to_fp32.py copies them as saved too.
  for (size_t i = 0; i < m.buffers.size(); ++i) add(PlannedTensor::Kind::kBuffer, i, m.buffers[i].name, m.buffers[i].shape, m.buffers[i].dtype, false);

  // huggingface_hub's split_torch_state_dict_into_shards: fill a shard in order until the
  // next tensor would tip it over; a tensor larger than the limit gets a shard of its own.
  std::vector<PlannedShard> shards;
  PlannedShard current;
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const int64_t nbytes = plan.tensors[i].nbytes();
    if (nbytes > o.max_shard_bytes) {
      shards.push_back({"", {i}, nbytes});
      continue;
    }
    if (!current.tensors.empty() && current.tensor_bytes + nbytes > o.max_shard_bytes) {
      shards.push_back(std::move(current));
      current = {};
    }
    current.tensors.push_back(i);
    current.tensor_bytes += nbytes;
  }
  if (!current.tensors.empty() || shards.empty()) shards.push_back(std::move(current));
  for (size_t s = 0; s < shards.size(); ++s) {
    shards[s].file = shard_name(s, shards.size());
    // Widest dtype first within a file, so every tensor is aligned to its element size.
    std::stable_sort(shards[s].tensors.begin(), shards[s].tensors.end(), [&](size_t a, size_t b) {
      return dtype_size(plan.tensors[a].dtype) > dtype_size(plan.tensors[b].dtype);
    });
  }
  plan.shards = std::move(shards);
  return plan;
}

ConsolidatedOutput consolidate(CheckpointReader& reader, const fs::path& out_dir, const ConsolidateOptions& options) {
  ConsolidatedOutput out;
  out.plan = plan_consolidation(reader.manifest(), options, (reader.dir() / kManifestName).string());
  const ConsolidationPlan& plan = out.plan;
  check_pieces(reader, plan);

  // Every header is known before any data is read: offsets follow from the manifest.
  std::vector<std::string> headers;
  int64_t total_bytes = 0, largest_file = 0;
  for (const PlannedShard& s : plan.shards) {
    std::vector<TensorEntry> entries;
    for (size_t i : s.tensors) entries.push_back({plan.tensors[i].name, plan.tensors[i].dtype, plan.tensors[i].shape});
    headers.push_back(encode_safetensors_header(entries, kOutputMetadata));
    const int64_t file_bytes = static_cast<int64_t>(headers.back().size()) + s.tensor_bytes;
    total_bytes += file_bytes;
    largest_file = std::max(largest_file, file_bytes);
  }
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  std::error_code dir_ec;
  ZT_CHECK(!ec && fs::is_directory(out_dir, dir_ec), IoError, "cannot create the output directory ", out_dir.string(), ": ",
           ec ? ec.message() : "a file of that name is in the way");
  check_room(out_dir, total_bytes, largest_file, {"the consolidated model", "nothing was written"});
  if (fs::exists(out_dir / kConsolidatedIndexName, ec)) {
    fs::remove(out_dir / kConsolidatedIndexName, ec);
    ZT_CHECK(!ec, IoError, "cannot remove the earlier index ", (out_dir / kConsolidatedIndexName).string(), ": ",
             ec.message());
    out.removed.push_back(out_dir / kConsolidatedIndexName);
  }

  // `new char[]` leaves the pages untouched until a tensor fills them (a vector would zero
  // the whole buffer at once).
  std::unique_ptr<char[]> buffer(new char[static_cast<size_t>(std::max<int64_t>(plan.buffer_bytes, 1))]);
  std::vector<char> scratch;
  for (size_t s = 0; s < plan.shards.size(); ++s) {
    const PlannedShard& shard = plan.shards[s];
    AtomicFile file(out_dir / shard.file);
    file.write(headers[s]);
    for (size_t i : shard.tensors) {
      read_planned_tensor(reader, plan.tensors[i], buffer.get());
      write_tensor(file, plan.tensors[i], buffer.get(), scratch);
    }
    file.commit();
    out.bytes_written += file.bytes_written();
    out.files.push_back(file.path());
  }
  if (plan.shards.size() > 1) {
    out.bytes_written += write_index(out_dir / kConsolidatedIndexName, plan);
    out.files.push_back(out_dir / kConsolidatedIndexName);
  }

  std::set<std::string> written;
  for (const fs::path& f : out.files) written.insert(f.filename().string());
  const size_t removed_first = out.removed.size();
  for (fs::directory_iterator it(out_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code type_ec;
    if (it->is_regular_file(type_ec) && consolidation_file(name) && !written.count(name)) {
      out.removed.push_back(it->path());
    }
  }
  for (size_t i = removed_first; i < out.removed.size(); ++i) {
    const fs::path& stale = out.removed[i];
    fs::remove(stale, ec);
    ZT_CHECK(!ec, IoError, "cannot remove ", stale.string(), ", left by an earlier consolidation: ", ec.message());
  }
  return out;
}

}  // namespace zerotrain::checkpoint
