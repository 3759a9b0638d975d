#include "zerotrain/checkpoint/deepspeed/import.h"

#include <algorithm>

#include "zerotrain/checkpoint/deepspeed/reading.h"
#include "zerotrain/checkpoint/file_io.h"
#include "zerotrain/checkpoint/reader.h"
#include "zerotrain/checkpoint/writer.h"
#include "zerotrain/core/error.h"

namespace zerotrain::checkpoint {
namespace {

using deepspeed::Param;
using deepspeed::Piece;
using deepspeed::Reading;
using deepspeed::Source;
using deepspeed::Whole;
namespace fs = std::filesystem;

// --- writing zerotrain's format -----------------------------------------------------------

TensorSource streamed(const std::string& key, int64_t numel, const Source& s) {
  return {key, Dtype::kF32, {numel}, nullptr, [s, key](int64_t offset, int64_t nbytes, void* dst) {
            s.file->read_f32(s.tensor, s.first + offset / 4, nbytes / 4, static_cast<float*>(dst), key);
          }};
}

DeepSpeedImportResult write(const Reading& r, const fs::path& out_dir) {
  fs::create_directories(out_dir);
  const fs::path final_dir = out_dir / r.tag;
  ZT_CHECK(!fs::exists(final_dir), CheckpointError, final_dir.string(),
           " exists already; import into another folder or remove it");
  Manifest m;
  m.tag = r.tag;
  const pickle::Value* ds_version = r.model0().root().find("ds_version");
  m.zerotrain_version =
      "imported from DeepSpeed " +
      (ds_version && ds_version->is(pickle::Value::Kind::kString) ? ds_version->text : "(no version)");
  m.world_size = r.world;
  m.zero_stage = r.stage;
  m.model_dtype = r.dtype;
  m.counters = r.counters;
  m.optimizer = r.optimizer;
  if (r.states) m.optimizer_states = {"exp_avg", "exp_avg_sq"};
  m.lr_scheduler = r.lr_scheduler;
  m.loss_scaler = r.loss_scaler;
  m.groups = r.groups;
  m.ds_config = r.ds_config;
  m.client_state = {{"imported_from", {{"format", "deepspeed"}, {"tag", r.tag}}}};
  for (const Param& p : r.params) {
    ParamRecord record{p.name, p.shape, r.dtype, p.group, {}};
    for (const Piece& piece : p.pieces) record.fragments.push_back({piece.rank, piece.begin, piece.end});
    m.params.push_back(std::move(record));
  }
  // Buffers and frozen parameters are small next to the states: read whole, for rank 0's file.
  struct WholeKind {
    const std::vector<Whole>& list;
    std::vector<WholeTensor>& records;
    std::string prefix;  // of the key in the rank file
  };
  const WholeKind wholes[] = {{r.buffers, m.buffers, "buffer/"}, {r.frozen, m.frozen, "frozen/"}};
  std::vector<std::vector<char>> whole_bytes;
  std::vector<TensorSource> whole_sources;
  whole_bytes.reserve(r.buffers.size() + r.frozen.size());
  for (const WholeKind& kind : wholes) {
    for (const Whole& t : kind.list) {
      kind.records.push_back({t.name, t.tensor.shape, std::string(dtype_tag(t.tensor.dtype))});
      const auto& bytes = whole_bytes.emplace_back(t.file->read_bytes(t.tensor, kind.prefix + t.name));
      whole_sources.push_back({kind.prefix + t.name, t.tensor.dtype, t.tensor.shape, bytes.data(), {}});
    }
  }
  const fs::path staging = out_dir / (r.tag + ".importing");
  fs::remove_all(staging);
  fs::create_directories(staging);
  DeepSpeedImportResult result;
  try {
    std::vector<PreparedFile> files;
    int64_t total = 0, largest = 0;
    for (int rank = 0; rank < r.world; ++rank) {
      std::vector<TensorSource> sources;
      for (const Param& p : r.params) {
        for (const Piece& piece : p.pieces) {
          if (piece.rank != rank) continue;
          const Fragment f{rank, piece.begin, piece.end};
          sources.push_back(streamed(fragment_key("fp32", p.name, f), f.numel(), piece.fp32));
          if (r.states) {
            sources.push_back(streamed(fragment_key("exp_avg", p.name, f), f.numel(), *piece.exp_avg));
            sources.push_back(streamed(fragment_key("exp_avg_sq", p.name, f), f.numel(), *piece.exp_avg_sq));
          }
        }
      }
      if (rank == 0) sources.insert(sources.end(), whole_sources.begin(), whole_sources.end());
      files.push_back(
          prepare_safetensors(std::move(sources), {{"format", "zerotrain-rank-file"}}, TensorChecksums::kNow));
      total += files.back().bytes();
      largest = std::max(largest, files.back().bytes());
    }
    check_room(out_dir, total, largest, {"the imported checkpoint", "nothing was written"});
    for (int rank = 0; rank < r.world; ++rank) {
      const auto w = write_safetensors(staging / rank_file_name(rank), files[static_cast<size_t>(rank)]);
      m.files.push_back({rank, rank_file_name(rank), w.bytes, w.checksum, w.header_checksum});
      result.bytes_written += w.bytes;
    }
    // The manifest's own checks (fragments cover every parameter, ranks and groups exist).
    const std::string text = manifest_to_json(m).dump(1);
    manifest_from_json(text, (staging / kManifestName).string());
    AtomicFile manifest(staging / kManifestName);
    manifest.write(text);
    manifest.commit();
    fs::rename(staging, final_dir);
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    throw;
  }
  AtomicFile latest(out_dir / kLatestName);
  latest.write(r.tag);
  latest.commit();
  result.tag_dir = final_dir;
  result.manifest = std::move(m);
  return result;
}

}  // namespace

DeepSpeedImportResult import_deepspeed(const fs::path& ds_dir, const fs::path& out_dir,
                                       const DeepSpeedImportOptions& options) {
  return write(deepspeed::read_deepspeed(ds_dir, options.tag, options.note), out_dir);
}

}  // namespace zerotrain::checkpoint
