// The *_coalesced collectives (coalesced.h): each bucket is packed into one flat tensor, issued
// as one plain collective, and unpacked into the caller's tensors on wait().
#include "zerotrain/comm/coalesced.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <utility>

#include "zerotrain/comm/collective_work.h"
#include "zerotrain/comm/types.h"
#include "zerotrain/core/error.h"

namespace zerotrain::comm::detail {
namespace {

// Consecutive runs of tensors of one dtype, each run cut where it would pass `cap_nbytes`.
std::vector<std::vector<size_t>> make_buckets(const std::vector<at::Tensor>& tensors, int64_t cap_nbytes) {
  std::vector<std::vector<size_t>> buckets;
  int64_t bucket_nbytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t nbytes = tensors[i].numel() * static_cast<int64_t>(tensors[i].element_size());
    const bool new_bucket = buckets.empty() ||
                            tensors[buckets.back().front()].scalar_type() != tensors[i].scalar_type() ||
                            (cap_nbytes > 0 && bucket_nbytes + nbytes > cap_nbytes);
    if (new_bucket) {
      buckets.emplace_back();
      bucket_nbytes = 0;
    }
    buckets.back().push_back(i);
    bucket_nbytes += nbytes;
  }
  return buckets;
}

// Everything a bucket's collective would reject, checked for every tensor before the first
// bucket is issued: a call either issues all its buckets or none.
void check_list(const std::vector<at::Tensor>& tensors, const char* what, const char* role, bool reduces = false) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    ZT_CHECK(tensors[i].defined(), UsageError, what, ": ", role, " tensor ", i, " is undefined");
    ZT_CHECK(tensors[i].layout() == at::kStrided, NotSupported, what, ": ", role, " tensor ", i,
             " is sparse; collectives take dense tensors");
    ZT_CHECK(!reduces || is_reducible(tensors[i].scalar_type()), NotSupported, what, ": ", role, " tensor ", i, " is ",
             tensors[i].scalar_type(), ", which cannot be reduced");
  }
}

Work group(std::vector<WorkPtr> parts, std::function<void()> finish, std::chrono::milliseconds timeout) {
  return Work(std::make_shared<GroupWork>(std::move(parts), std::move(finish), timeout));
}

// Work -> WorkImpl, to put a bucket's Work inside a GroupWork.
class WorkAdapter final : public WorkImpl {
 public:
  explicit WorkAdapter(Work work) : work_(std::move(work)) {}
  bool wait_until(Clock::time_point deadline) override {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    work_.wait(std::max(left, std::chrono::milliseconds(0)));   // throws TimeoutError itself
    return true;
  }
  bool is_completed() override { return work_.is_completed(); }

 private:
  Work work_;
};

WorkPtr adapt(Work work) { return std::make_shared<WorkAdapter>(std::move(work)); }

void check_same_dtype(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b, const char* what) {
  ZT_CHECK(a.size() == b.size(), UsageError, what, ": ", a.size(), " inputs but ", b.size(), " outputs");
  for (size_t i = 0; i < a.size(); ++i) {
    ZT_CHECK(a[i].scalar_type() == a.front().scalar_type() && b[i].scalar_type() == a.front().scalar_type(),
             UsageError, what, ": tensor ", i, " is ", a[i].scalar_type(), "/", b[i].scalar_type(),
             " but tensor 0 is ", a.front().scalar_type(), "; one call takes one dtype");
  }
}

}  // namespace

Work coalesced_all_reduce(const Coalescing& how, const std::vector<at::Tensor>& tensors,
                          const IssueInPlace& all_reduce) {
  check_list(tensors, "all_reduce_coalesced", "", /*reduces=*/true);
  std::vector<WorkPtr> parts;
  std::vector<std::function<void()>> unpack;
  for (const auto& bucket : make_buckets(tensors, how.bucket_nbytes)) {
    std::vector<at::Tensor> views;
    for (size_t i : bucket) views.push_back(tensors[i].reshape(-1));
    at::Tensor packed = at::cat(views);   // (sum of numels,) in the bucket's dtype
    parts.push_back(adapt(all_reduce(packed)));
    // The unpack step holds the tensors, not the caller's vector (it may be gone by wait()).
    std::vector<at::Tensor> targets;
    for (size_t i : bucket) targets.push_back(tensors[i]);
    unpack.push_back([packed, targets] {
      int64_t offset = 0;
      for (const auto& t : targets) {
        t.copy_(packed.narrow(0, offset, t.numel()).view(t.sizes()));
        offset += t.numel();
      }
    });
  }
  return group(std::move(parts), [unpack] { for (const auto& f : unpack) f(); }, how.timeout);
}

Work coalesced_reduce_scatter(const Coalescing& how, const std::vector<at::Tensor>& inputs,
                              const std::vector<at::Tensor>& outputs, const IssueInto& reduce_scatter) {
  check_list(inputs, "reduce_scatter_coalesced", "input", /*reduces=*/true);
  check_list(outputs, "reduce_scatter_coalesced", "output");
  check_same_dtype(inputs, outputs, "reduce_scatter_coalesced");
  const int ws = how.world_size;
  const int rank = how.rank;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int64_t want = chunk_range(inputs[i].numel(), ws, rank).numel;
    ZT_CHECK(outputs[i].numel() == want, UsageError, "reduce_scatter_coalesced: output ", i, " has ",
             outputs[i].numel(), " elements, but rank ", rank, "'s chunk of input ", i, " (", inputs[i].numel(),
             " elements) is ", want);
  }
  std::vector<WorkPtr> parts;
  std::vector<std::function<void()>> unpack;
  for (const auto& bucket : make_buckets(inputs, how.bucket_nbytes)) {
    // Rank-major packing: segment r holds every tensor's chunk r, each padded to its largest chunk.
    int64_t segment = 0;
    for (size_t i : bucket) segment += chunk_numel_max(inputs[i].numel(), ws);
    at::Tensor packed = at::zeros({segment * ws}, inputs[bucket.front()].options());
    int64_t offset = 0;
    std::vector<std::pair<at::Tensor, int64_t>> targets;   // (output, offset in the segment)
    for (size_t i : bucket) {
      const at::Tensor source = inputs[i].reshape(-1);
      for (int r = 0; r < ws; ++r) {
        const ChunkRange c = chunk_range(source.numel(), ws, r);
        packed.narrow(0, r * segment + offset, c.numel).copy_(source.narrow(0, c.offset, c.numel));
      }
      targets.emplace_back(outputs[i], offset);
      offset += chunk_numel_max(source.numel(), ws);
    }
    at::Tensor result = at::empty({segment}, packed.options());
    parts.push_back(adapt(reduce_scatter(packed, result)));
    unpack.push_back([result, targets] {
      for (const auto& [out, at_offset] : targets) {
        out.copy_(result.narrow(0, at_offset, out.numel()).view(out.sizes()));
      }
    });
  }
  return group(std::move(parts), [unpack] { for (const auto& f : unpack) f(); }, how.timeout);
}

Work coalesced_all_gather(const Coalescing& how, const std::vector<at::Tensor>& inputs,
                          const std::vector<at::Tensor>& outputs, const IssueInto& all_gather) {
  check_list(inputs, "all_gather_coalesced", "input");
  check_list(outputs, "all_gather_coalesced", "output");
  check_same_dtype(inputs, outputs, "all_gather_coalesced");
  const int ws = how.world_size;
  const int rank = how.rank;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int64_t want = chunk_range(outputs[i].numel(), ws, rank).numel;
    ZT_CHECK(inputs[i].numel() == want, UsageError, "all_gather_coalesced: input ", i, " has ", inputs[i].numel(),
             " elements, but rank ", rank, "'s chunk of output ", i, " (", outputs[i].numel(), " elements) is ", want);
  }
  std::vector<WorkPtr> parts;
  std::vector<std::function<void()>> unpack;
  for (const auto& bucket : make_buckets(outputs, how.bucket_nbytes)) {
    int64_t segment = 0;
    for (size_t i : bucket) segment += chunk_numel_max(outputs[i].numel(), ws);
    at::Tensor packed = at::zeros({segment}, inputs[bucket.front()].options());
    int64_t offset = 0;
    std::vector<std::pair<at::Tensor, int64_t>> targets;
    for (size_t i : bucket) {
      packed.narrow(0, offset, inputs[i].numel()).copy_(inputs[i].reshape(-1));
      targets.emplace_back(outputs[i], offset);
      offset += chunk_numel_max(outputs[i].numel(), ws);
    }
    at::Tensor result = at::empty({segment * ws}, packed.options());
    parts.push_back(adapt(all_gather(packed, result)));
    unpack.push_back([result, targets, segment, ws] {
      for (const auto& [out, at_offset] : targets) {
        at::Tensor gathered = at::empty({out.numel()}, out.options());
        for (int r = 0; r < ws; ++r) {
          const ChunkRange c = chunk_range(out.numel(), ws, r);
          gathered.narrow(0, c.offset, c.numel).copy_(result.narrow(0, r * segment + at_offset, c.numel));
        }
        out.copy_(gathered.view(out.sizes()));
      }
    });
  }
  return group(std::move(parts), [unpack] { for (const auto& f : unpack) f(); }, how.timeout);
}

}  // namespace zerotrain::comm::detail
