// The *_coalesced collectives: tensors packed into flat buckets of Coalescing::bucket_nbytes,
// one plain collective per bucket, issued through the function the caller passes. Below the
// Communicator: Communicator::*_coalesced pass in its own all_reduce, reduce_scatter and
// all_gather, and nothing here includes communicator.h.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "zerotrain/comm/work.h"

namespace zerotrain::comm::detail {

// What the packing needs to know of the communicator that issues the buckets.
struct Coalescing {
  int rank = 0;
  int world_size = 1;
  int64_t bucket_nbytes = 0;             // CommOptions::bucket_nbytes (0: one bucket per dtype run)
  std::chrono::milliseconds timeout{};   // CommOptions::timeout: the wait of the whole call
};

// One plain collective over one packed bucket: all_reduce in place, and reduce_scatter or
// all_gather from `input` into `output`.
using IssueInPlace = std::function<Work(const at::Tensor& tensor)>;
using IssueInto = std::function<Work(const at::Tensor& input, const at::Tensor& output)>;

Work coalesced_all_reduce(const Coalescing& how, const std::vector<at::Tensor>& tensors,
                          const IssueInPlace& all_reduce);
Work coalesced_reduce_scatter(const Coalescing& how, const std::vector<at::Tensor>& inputs,
                              const std::vector<at::Tensor>& outputs, const IssueInto& reduce_scatter);
Work coalesced_all_gather(const Coalescing& how, const std::vector<at::Tensor>& inputs,
                          const std::vector<at::Tensor>& outputs, const IssueInto& all_gather);

}  // namespace zerotrain::comm::detail
