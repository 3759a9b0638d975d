#include "zerotrain/checkpoint/protocol/provider.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "zerotrain/checkpoint/protocol/tensor_dtype.h"
#include "zerotrain/checkpoint/reader.h"
#include "zerotrain/core/error.h"

namespace zerotrain::checkpoint {
namespace {

std::vector<int64_t> shape_of(const at::Tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }

}  // namespace

at::Tensor RankFileContents::hold(const at::Tensor& t) {
  at::Tensor host = t.detach().to(at::kCPU).contiguous();
  const bool live = host.numel() > 0 && host.storage().is_alias_of(t.storage());
  return keep_.emplace_back(Held{std::move(host), live}).tensor;
}

namespace {

// Rounds a snapshot offset up, so that each copied range starts on its own cache line.
int64_t aligned(int64_t offset) { return (offset + 63) / 64 * 64; }

}  // namespace

std::vector<size_t> RankFileContents::live_sources() const {
  std::vector<std::pair<uintptr_t, uintptr_t>> live;   // byte ranges of the live held tensors
  for (const Held& h : keep_) {
    if (!h.live) continue;
    const auto begin = reinterpret_cast<uintptr_t>(h.tensor.data_ptr());
    live.emplace_back(begin, begin + h.tensor.nbytes());
  }
  // Held tensors may overlap (two views of one buffer): merged, each byte is in one range.
  std::sort(live.begin(), live.end());
  std::vector<std::pair<uintptr_t, uintptr_t>> merged;
  for (const auto& range : live) {
    if (!merged.empty() && range.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, range.second);
    } else {
      merged.push_back(range);
    }
  }
  live = std::move(merged);
  std::vector<size_t> out;
  for (size_t i = 0; i < sources_.size(); ++i) {
    if (sources_[i].is_read()) {   // read from a store that steps change
      out.push_back(i);
      continue;
    }
    const auto at = reinterpret_cast<uintptr_t>(sources_[i].data);
    auto it = std::upper_bound(live.begin(), live.end(), std::make_pair(at, UINTPTR_MAX));
    if (it != live.begin() && at < std::prev(it)->second) out.push_back(i);
  }
  return out;
}

int64_t RankFileContents::live_bytes() const {
  int64_t n = 0;
  for (size_t i : live_sources()) n = aligned(n) + sources_[i].nbytes();
  return n;
}

void RankFileContents::snapshot(std::vector<at::Tensor>& reuse) {
  const std::vector<size_t> live = live_sources();
  int64_t needed = 0;
  for (size_t i : live) needed = aligned(needed) + sources_[i].nbytes();
  at::Tensor arena = reuse.size() == 1 && static_cast<int64_t>(reuse[0].nbytes()) >= needed
                         ? reuse[0]
                         : at::empty({std::max<int64_t>(needed, 1)}, at::TensorOptions().dtype(at::kByte));
  auto* base = static_cast<char*>(arena.data_ptr());
  // What to copy, in pieces of at most 4 MiB so that the copy spreads over LibTorch's threads.
  struct Piece {
    char* dst;
    const char* src;
    int64_t bytes;
  };
  constexpr int64_t kPiece = 4 << 20;
  std::vector<Piece> pieces;
  int64_t offset = 0;
  for (size_t i : live) {
    TensorSource& source = sources_[i];
    const int64_t bytes = source.nbytes();
    offset = aligned(offset);
    if (source.is_read()) {   // read now, in this thread: the store is not thread-safe
      source.read(0, bytes, base + offset);
      source.data = base + offset;
      source.read = nullptr;
      offset += bytes;
      continue;
    }
    const auto* src = static_cast<const char*>(source.data);
    for (int64_t done = 0; done < bytes; done += kPiece) {
      pieces.push_back({base + offset + done, src + done, std::min(kPiece, bytes - done)});
    }
    source.data = base + offset;
    offset += bytes;
  }
  at::parallel_for(0, static_cast<int64_t>(pieces.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) std::memcpy(pieces[p].dst, pieces[p].src, static_cast<size_t>(pieces[p].bytes));
  });
  // The live tensors are no longer needed by the file: only the arena is.
  keep_.erase(std::remove_if(keep_.begin(), keep_.end(), [](const Held& h) { return h.live; }), keep_.end());
  keep_.push_back({arena, false});
  reuse = {arena};
}

void RankFileContents::add_read(std::string key, Dtype dtype, std::vector<int64_t> shape, TensorSource::Read read) {
  TensorSource source{std::move(key), dtype, std::move(shape), nullptr};
  source.read = std::move(read);
  sources_.push_back(std::move(source));
}

void RankFileContents::add(std::string key, const at::Tensor& t) {
  const at::Tensor host = hold(t);
  sources_.push_back({std::move(key), checkpoint_dtype(host.scalar_type()), shape_of(host), host.data_ptr()});
}

void RankFileContents::add_fp32_range(std::string key, const at::Tensor& t, int64_t offset, int64_t numel) {
  ZT_INTERNAL_ASSERT(t.is_cpu() && t.is_contiguous() && t.scalar_type() == at::kFloat && t.dim() == 1 &&
                         offset >= 0 && offset + numel <= t.numel(),
                     "a range of a checkpoint's fp32 state outside its held tensor");
  sources_.push_back({std::move(key), Dtype::kF32, {numel}, t.data_ptr<float>() + offset});
}

const Manifest& LoadPlan::manifest() const { return reader_.manifest(); }

std::string LoadPlan::manifest_file() const { return (reader_.dir() / kManifestName).string(); }

std::string LoadPlan::rank_file(int rank) const {
  return (reader_.dir() / reader_.manifest().files[static_cast<size_t>(rank)].name).string();
}

std::vector<LoadPlan::Read> LoadPlan::overlapping(const ParamRecord& p, const std::string& state, int64_t lo,
                                                  int64_t hi) {
  std::vector<Read> reads;
  for (const Fragment& f : p.fragments) {
    if (f.end <= lo || f.begin >= hi) continue;
    Read r{f.rank, fragment_key(state, p.name, f), {}, 0, f.numel()};
    const TensorEntry* e = reader_.header(f.rank).find(r.key);
    const std::string file = rank_file(f.rank);
    ZT_CHECK(e != nullptr, CheckpointError, file, ": has no tensor \"", r.key, "\" although the manifest names it");
    ZT_CHECK(e->dtype == Dtype::kF32 && e->nbytes() == f.numel() * 4, CheckpointError, file, ": tensor \"", r.key,
             "\" is not ", f.numel(), " fp32 elements");
    const int64_t a = std::max(lo, f.begin), b = std::min(hi, f.end);
    r.skip = a - f.begin;
    r.at = a - lo;
    r.count = b - a;
    reads.push_back(std::move(r));
  }
  return reads;
}

void LoadPlan::read_range(const ParamRecord& p, const std::string& state, int64_t lo, const at::Tensor& dst) {
  for (Read& r : overlapping(p, state, lo, lo + dst.numel())) {
    r.dst = dst.narrow(0, r.at, r.count);
    reads_.push_back(std::move(r));
  }
}

void LoadPlan::read_range_to(const ParamRecord& p, const std::string& state, int64_t lo, int64_t numel, Sink sink) {
  for (Read& r : overlapping(p, state, lo, lo + numel)) {
    r.sink = sink;
    reads_.push_back(std::move(r));
  }
}

void LoadPlan::zero_with_reads(const at::Tensor& t) { zero_.push_back(t); }

void LoadPlan::zero_to(int64_t numel, Sink sink) { zero_sinks_.emplace_back(numel, std::move(sink)); }

at::Tensor LoadPlan::read_now(int rank, const std::string& key, Dtype dtype, const std::vector<int64_t>& shape) {
  at::Tensor t = at::empty(shape, scalar_type(dtype));
  reader_.read_tensor(rank, key, dtype, t.data_ptr(), static_cast<int64_t>(t.nbytes()));
  return t;
}

void LoadPlan::execute_reads() {
  at::NoGradGuard no_grad;
  // A sink gets its fragments this many bytes at a time.
  constexpr int64_t kPieceBytes = int64_t{4} << 20;
  for (const Read& r : reads_) {
    const int64_t nbytes = r.fragment_numel * 4;
    if (r.sink) {
      const int64_t first = r.skip, last = r.skip + r.count;   // the fragment's elements the sink wants
      reader_.read_tensor_in_pieces(r.rank, r.key, Dtype::kF32, nbytes, kPieceBytes,
                                    [&](int64_t offset, const void* data, int64_t n) {
                                      const int64_t a = std::max(first, offset / 4), b = std::min(last, (offset + n) / 4);
                                      if (a < b) r.sink(r.at + (a - first), static_cast<const float*>(data) + (a - offset / 4), b - a);
                                    });
      continue;
    }
    // A CPU destination that is the whole fragment gets the file's bytes directly.
    if (r.skip == 0 && r.dst.numel() == r.fragment_numel && r.dst.is_cpu() && r.dst.is_contiguous()) {
      reader_.read_tensor(r.rank, r.key, Dtype::kF32, r.dst.data_ptr(), nbytes);
      continue;
    }
    // Otherwise the fragment is read into host memory and its part copied into place: on a
    // GPU engine that copy is the upload (blocking, from pageable memory, so `whole` may go
    // when it returns; a load is not a step, and one fragment is in host memory at a time).
    const at::Tensor whole = at::empty({r.fragment_numel}, at::kFloat);
    reader_.read_tensor(r.rank, r.key, Dtype::kF32, whole.data_ptr(), nbytes);
    r.dst.copy_(whole.narrow(0, r.skip, r.dst.numel()));
  }
  for (const at::Tensor& t : zero_) t.zero_();
  if (zero_sinks_.empty()) return;
  const std::vector<float> zeros(static_cast<size_t>(kPieceBytes / 4), 0.0f);
  for (const auto& [numel, sink] : zero_sinks_) {
    for (int64_t i = 0; i < numel; i += kPieceBytes / 4) sink(i, zeros.data(), std::min(kPieceBytes / 4, numel - i));
  }
}

}  // namespace zerotrain::checkpoint
