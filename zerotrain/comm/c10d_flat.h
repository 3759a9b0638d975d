// The flat collectives of a c10d process group across the LibTorch versions we build
// against: reduce_scatter_single/all_gather_single in the pinned LibTorch 2.15,
// _reduce_scatter_base/_allgather_base before the rename (2.11, which an offline GPU machine
// may have). Same arguments. Internal to comm/; include after the process group's header.
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace zerotrain::comm::detail {

template <class PG>
c10::intrusive_ptr<c10d::Work> reduce_scatter_flat(PG& pg, at::Tensor& out, at::Tensor& in,
                                                   const c10d::ReduceScatterOptions& o) {
  if constexpr (requires { pg.reduce_scatter_single(out, in, o); }) {
    return pg.reduce_scatter_single(out, in, o);
  } else {
    return pg._reduce_scatter_base(out, in, o);
  }
}

template <class PG>
c10::intrusive_ptr<c10d::Work> all_gather_flat(PG& pg, at::Tensor& out, at::Tensor& in) {
  if constexpr (requires { pg.all_gather_single(out, in); }) {
    return pg.all_gather_single(out, in);
  } else {
    return pg._allgather_base(out, in);
  }
}

}  // namespace zerotrain::comm::detail
