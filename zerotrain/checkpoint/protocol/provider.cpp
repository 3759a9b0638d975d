#include "zerotrain/checkpoint/protocol/provider.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>

#include "zerotrain/checkpoint/protocol/tensor_dtype.h"
#include "zerotrain/checkpoint/reader.h"
#include "zerotrain/core/error.h"

namespace zerotrain::checkpoint {
namespace {

std::vector<int64_t> shape_of(const at::Tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }

}  // namespace

at::Tensor RankFileContents::hold(const at::Tensor& t) {
  return keep_.emplace_back(t.detach().to(at::kCPU).contiguous());
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

void LoadPlan::read_range(const ParamRecord& p, const std::string& state, int64_t lo, const at::Tensor& dst) {
  const int64_t hi = lo + dst.numel();
  for (const Fragment& f : p.fragments) {
    if (f.end <= lo || f.begin >= hi) continue;
    Read r{f.rank, fragment_key(state, p.name, f), {}, 0, f.numel()};
    const TensorEntry* e = reader_.header(f.rank).find(r.key);
    const std::string file = rank_file(f.rank);
    ZT_CHECK(e != nullptr, CheckpointError, file, ": has no tensor \"", r.key, "\" although the manifest names it");
    ZT_CHECK(e->dtype == Dtype::kF32 && e->nbytes() == f.numel() * 4, CheckpointError, file, ": tensor \"", r.key,
             "\" is not ", f.numel(), " fp32 elements");
    const int64_t a = std::max(lo, f.begin), b = std::min(hi, f.end);
    r.dst = dst.narrow(0, a - lo, b - a);
    r.skip = a - f.begin;
    reads_.push_back(std::move(r));
  }
}

void LoadPlan::zero_with_reads(const at::Tensor& t) { zero_.push_back(t); }

at::Tensor LoadPlan::read_now(int rank, const std::string& key, Dtype dtype, const std::vector<int64_t>& shape) {
  at::Tensor t = at::empty(shape, scalar_type(dtype));
  reader_.read_tensor(rank, key, dtype, t.data_ptr(), static_cast<int64_t>(t.nbytes()));
  return t;
}

void LoadPlan::execute_reads() {
  at::NoGradGuard no_grad;
  for (const Read& r : reads_) {
    const int64_t nbytes = r.fragment_numel * 4;
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
}

}  // namespace zerotrain::checkpoint
