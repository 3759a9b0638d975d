// Checkpoints written without training and without LibTorch, through the same writer and
// manifest code the engine's save uses (checkpoint/writer.h, manifest.h): for the
// consolidation unit tests, the peak-memory test's gigabyte checkpoint and the checkpoint
// reader's fuzz target. The parameters are laid end to end in one flat buffer split into
// equal chunks, one per rank (ZeRO stage 1-3's layout), so parameters straddle ranks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "zerotrain/checkpoint/file_io.h"
#include "zerotrain/checkpoint/float_convert.h"
#include "zerotrain/checkpoint/manifest.h"
#include "zerotrain/checkpoint/reader.h"
#include "zerotrain/checkpoint/writer.h"

namespace zerotrain::test {

struct SyntheticTensor {
  std::string name;
  std::vector<int64_t> shape;
  checkpoint::Dtype dtype = checkpoint::Dtype::kF32;   // frozen parameters and buffers only
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

struct SyntheticSpec {
  int world_size = 2;
  std::vector<SyntheticTensor> params;    // trained: fp32 master fragments on every rank
  std::vector<SyntheticTensor> frozen;    // whole, in rank 0's file
  std::vector<SyntheticTensor> buffers;   // whole, in rank 0's file
  std::vector<std::string> optimizer_states = {"exp_avg", "exp_avg_sq"};
  std::string tag = "global_step3";
};

// The value of element `i` of state `state` (0: the fp32 master, then the optimizer states)
// of tensor `tensor`: distinct across tensors and states, exact in fp32, with a spread of
// magnitudes and signs so that 16-bit conversions round.
inline float synthetic_value(size_t tensor, int state, int64_t i) {
  const uint32_t h = static_cast<uint32_t>(i) * 2654435761u + static_cast<uint32_t>(tensor) * 40503u +
                     static_cast<uint32_t>(state) * 977u;
  return (static_cast<float>(h % 2000003u) - 1000001.0f) / static_cast<float>(1u << (h % 23u));
}

// Bytes of a whole tensor of `dtype`, element i from synthetic_value (integers for integer
// dtypes; F64 and 16-bit values written through float).
inline std::vector<char> synthetic_bytes(const SyntheticTensor& t, size_t tensor) {
  using checkpoint::Dtype;
  const int64_t size = checkpoint::dtype_size(t.dtype);
  std::vector<char> out(static_cast<size_t>(t.numel() * size));
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = synthetic_value(tensor, 0, i);
    char* p = out.data() + i * size;
    switch (t.dtype) {
      case Dtype::kF32: std::memcpy(p, &v, 4); break;
      case Dtype::kF64: { const double d = v; std::memcpy(p, &d, 8); break; }
      case Dtype::kBF16: { const uint16_t b = checkpoint::bf16_from_float(v); std::memcpy(p, &b, 2); break; }
      case Dtype::kF16: { const uint16_t b = checkpoint::f16_from_float(v); std::memcpy(p, &b, 2); break; }
      case Dtype::kBool: *p = v > 0 ? 1 : 0; break;
      default: { const int64_t x = static_cast<int64_t>(v); std::memcpy(p, &x, static_cast<size_t>(size)); break; }   // little-endian: the low bytes
    }
  }
  return out;
}

// Writes `<save_dir>/<spec.tag>/` (manifest and rank files) and `<save_dir>/latest`.
inline checkpoint::Manifest write_synthetic_checkpoint(const std::filesystem::path& save_dir, const SyntheticSpec& spec) {
  namespace ckpt = checkpoint;
  const std::filesystem::path dir = save_dir / spec.tag;
  std::filesystem::create_directories(dir);
  int64_t total = 0;
  for (const auto& p : spec.params) total += p.numel();
  const int64_t chunk = (total + spec.world_size - 1) / spec.world_size;

  ckpt::Manifest m;
  m.tag = spec.tag;
  m.zerotrain_version = "synthetic";
  m.world_size = spec.world_size;
  m.zero_stage = 1;
  m.counters = {3, 72, 0, 3};
  m.optimizer = {{"type", "AdamW"}, {"params", {{"lr", 0.001}}}};
  m.optimizer_states = spec.optimizer_states;
  m.groups.push_back({"decay", 0.001, 0.01, 3});
  m.ds_config = ckpt::Json::object();
  m.client_state = ckpt::Json::object();
  for (const auto& p : spec.params) m.params.push_back({p.name, p.shape, "fp32", 0, {}});
  for (const auto& t : spec.frozen) m.frozen.push_back({t.name, t.shape, std::string(ckpt::dtype_tag(t.dtype))});
  for (const auto& t : spec.buffers) m.buffers.push_back({t.name, t.shape, std::string(ckpt::dtype_tag(t.dtype))});

  for (int rank = 0; rank < spec.world_size; ++rank) {
    const int64_t lo = std::min(total, rank * chunk), hi = std::min(total, lo + chunk);
    std::vector<std::vector<float>> data;   // kept alive until the file is written
    std::vector<std::vector<char>> wholes;
    std::vector<ckpt::TensorSource> sources;
    data.reserve(spec.params.size() * (1 + spec.optimizer_states.size()));
    int64_t offset = 0;
    for (size_t i = 0; i < spec.params.size(); ++i) {
      const int64_t begin = std::max(lo, offset) - offset, end = std::min(hi, offset + spec.params[i].numel()) - offset;
      offset += spec.params[i].numel();
      if (begin >= end) continue;
      const ckpt::Fragment f{rank, begin, end};
      m.params[i].fragments.push_back(f);
      for (int state = 0; state <= static_cast<int>(spec.optimizer_states.size()); ++state) {
        auto& values = data.emplace_back(static_cast<size_t>(end - begin));
        for (int64_t k = begin; k < end; ++k) values[static_cast<size_t>(k - begin)] = synthetic_value(i, state, k);
        const std::string state_name = state == 0 ? "fp32" : spec.optimizer_states[static_cast<size_t>(state - 1)];
        sources.push_back({ckpt::fragment_key(state_name, spec.params[i].name, f), ckpt::Dtype::kF32, {end - begin},
                           values.data()});
      }
    }
    if (rank == 0) {
      auto whole = [&](const std::string& prefix, const std::vector<SyntheticTensor>& list, size_t first_index) {
        for (size_t i = 0; i < list.size(); ++i) {
          const auto& bytes = wholes.emplace_back(synthetic_bytes(list[i], first_index + i));
          sources.push_back({prefix + list[i].name, list[i].dtype, list[i].shape, bytes.data()});
        }
      };
      wholes.reserve(spec.frozen.size() + spec.buffers.size());
      whole("frozen/", spec.frozen, spec.params.size());
      whole("buffer/", spec.buffers, spec.params.size() + spec.frozen.size());
    }
    const auto file = ckpt::prepare_safetensors(std::move(sources), {{"format", "zerotrain-rank-file"}}, ckpt::TensorChecksums::kNow);
    const auto w = ckpt::write_safetensors(dir / ckpt::rank_file_name(rank), file);
    m.files.push_back({rank, ckpt::rank_file_name(rank), w.bytes, w.checksum, w.header_checksum});
  }
  ckpt::AtomicFile manifest(dir / ckpt::kManifestName);
  manifest.write(ckpt::manifest_to_json(m).dump(1));
  manifest.commit();
  ckpt::AtomicFile latest(save_dir / ckpt::kLatestName);
  latest.write(spec.tag);
  latest.commit();
  return m;
}

}  // namespace zerotrain::test
