#include "zerotrain/comm/backend.h"

#include <ATen/ATen.h>

#include "zerotrain/core/error.h"

namespace zerotrain::comm::detail {

std::unique_ptr<Backend> Backend::subgroup(const std::vector<int>&, const std::string&) {
  throw NotSupported(str("the ", to_string(kind()), " backend makes no subgroups; use gloo or mpi across hosts"));
}

void divide_in_place(const at::Tensor& t, int world_size) {
  if (at::isFloatingType(t.scalar_type())) {
    t.div_(world_size);
  } else {
    t.copy_(at::div(t, world_size, "trunc"));
  }
}

bool is_reducible(at::ScalarType dtype) {
  return at::isFloatingType(dtype) || (at::isIntegralType(dtype, /*includeBool=*/false));
}

}  // namespace zerotrain::comm::detail
