#include "zerotrain/checkpoint/consolidate.h"

#include <algorithm>
#include <memory>
#include <set>
#include <unordered_map>

#include "zerotrain/checkpoint/float_convert.h"
#include "zerotrain/core/error.h"

namespace zerotrain::checkpoint {
namespace {

namespace fs = std::filesystem;

// Conversions go through this much memory at a time, so a 16-bit output costs no second
// copy of the largest tensor.
constexpr int64_t kScratchBytes = 4 << 20;

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

void write_tensor(ShardedWriter& out, const PlannedTensor& t, const char* buffer, std::vector<char>& scratch) {
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
  int64_t total_bytes = 0;
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
                 !__builtin_add_overflow(total_bytes, nbytes, &total_bytes),
             CheckpointError, file, ": ", describe(t), " is too large to address (a damaged manifest)");
    plan.buffer_bytes = std::max(plan.buffer_bytes, saved_nbytes);
    plan.tensors.push_back(std::move(t));
  };
  for (size_t i = 0; i < m.params.size(); ++i) add(PlannedTensor::Kind::kParam, i, m.params[i].name, m.params[i].shape, "F32", true);
  for (size_t i = 0; i < m.frozen.size(); ++i) add(PlannedTensor::Kind::kFrozen, i, m.frozen[i].name, m.frozen[i].shape, m.frozen[i].dtype, true);
  // Buffers keep their dtype: running statistics, step counts and masks are not weights to
  // round, and DeepSpeed's zero_to_fp32.py copies them as saved too.
  for (size_t i = 0; i < m.buffers.size(); ++i) add(PlannedTensor::Kind::kBuffer, i, m.buffers[i].name, m.buffers[i].shape, m.buffers[i].dtype, false);

  std::vector<OutputTensor> outputs;
  for (const PlannedTensor& t : plan.tensors) outputs.push_back({t.name, t.dtype, t.shape});
  plan.output = plan_shards(std::move(outputs), o.max_shard_bytes, kConsolidatedName);
  return plan;
}

ConsolidatedOutput consolidate(CheckpointReader& reader, const fs::path& out_dir, const ConsolidateOptions& options) {
  ConsolidatedOutput out;
  out.plan = plan_consolidation(reader.manifest(), options, (reader.dir() / kManifestName).string());
  const ConsolidationPlan& plan = out.plan;
  check_pieces(reader, plan);

  // Every header is known before any data is read: offsets follow from the manifest.
  ShardedWriter writer(out_dir, plan.output, {"the consolidated model", "nothing was written"});
  // `new char[]` leaves the pages untouched until a tensor fills them (a vector would zero
  // the whole buffer at once).
  std::unique_ptr<char[]> buffer(new char[static_cast<size_t>(std::max<int64_t>(plan.buffer_bytes, 1))]);
  std::vector<char> scratch;
  for (size_t i : plan.output.write_order()) {
    read_planned_tensor(reader, plan.tensors[i], buffer.get());
    write_tensor(writer, plan.tensors[i], buffer.get(), scratch);
  }
  ShardedOutput written = writer.finish();
  out.files = std::move(written.files);
  out.bytes_written = written.bytes_written;
  out.removed = std::move(written.removed);
  return out;
}

}  // namespace zerotrain::checkpoint
