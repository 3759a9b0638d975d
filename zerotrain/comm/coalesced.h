// The *_coalesced collectives: tensors packed into flat buckets of CommOptions::bucket_nbytes,
// one collective of the Communicator per bucket. Communicator::*_coalesced call these.
#pragma once

#include <vector>

#include "zerotrain/comm/communicator.h"

namespace zerotrain::comm::detail {

Work coalesced_all_reduce(Communicator& comm, const std::vector<at::Tensor>& tensors, ReduceOp op);
Work coalesced_reduce_scatter(Communicator& comm, const std::vector<at::Tensor>& inputs,
                              const std::vector<at::Tensor>& outputs, ReduceOp op);
Work coalesced_all_gather(Communicator& comm, const std::vector<at::Tensor>& inputs,
                          const std::vector<at::Tensor>& outputs);

}  // namespace zerotrain::comm::detail
