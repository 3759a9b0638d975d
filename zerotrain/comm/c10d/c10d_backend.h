// comm/c10d/: what the transports built on c10d share (gloo/, nccl/, process_group/).
//
// A Backend whose five collectives are forwarded to a c10d group or backend whose work
// completes on the host: ProcessGroupGloo (gloo/gloo_backend.cpp) and an adopted
// torch.distributed ProcessGroup (process_group/process_group_backend.cpp). The derived class
// makes pg_ and says what its transport reduces and averages. Internal to comm/; include
// after the group's header.
#pragma once

#include "zerotrain/comm/backend.h"
#include "zerotrain/comm/c10d/c10d_flat.h"
#include "zerotrain/core/error.h"

namespace zerotrain::comm::detail {

template <class Group>
class C10dBackend : public Backend {
 public:
  WorkPtr all_reduce(const at::Tensor& tensor, ReduceOp op) override {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions o;
    o.reduceOp = to_c10d(op);
    return wrap(group().allreduce(tensors, o));
  }
  WorkPtr reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op) override {
    at::Tensor in = input, out = output;
    c10d::ReduceScatterOptions o;
    o.reduceOp = to_c10d(op);
    return wrap(reduce_scatter_flat(group(), out, in, o));
  }
  WorkPtr all_gather(const at::Tensor& input, const at::Tensor& output) override {
    at::Tensor in = input, out = output;
    return wrap(all_gather_flat(group(), out, in));
  }
  WorkPtr broadcast(const at::Tensor& tensor, int root) override {
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    return wrap(group().broadcast(tensors, o));
  }
  WorkPtr barrier() override { return wrap(group().barrier()); }

 protected:
  // Null once released (process_group/process_group.h: release_adopted_groups).
  c10::intrusive_ptr<Group> pg_;

  Group& group() {
    if (!pg_) {
      throw CommError("this engine's process group was released at interpreter exit (the Python package "
                      "releases torch.distributed's group then, so that its threads end before Python does); "
                      "no collective can run after that: finish training before the script ends",
                      "comm");
    }
    return *pg_;
  }

 private:
  static WorkPtr wrap(c10::intrusive_ptr<c10d::Work> work) { return std::make_shared<C10dWork>(std::move(work)); }
};

}  // namespace zerotrain::comm::detail
