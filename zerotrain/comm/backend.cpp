#include "zerotrain/comm/backend.h"

#include "zerotrain/core/error.h"

namespace zerotrain::comm::detail {

std::unique_ptr<Backend> Backend::subgroup(const std::vector<int>&, const std::string&) {
  throw NotSupported(str("the ", to_string(kind()), " backend makes no subgroups; use gloo or mpi across hosts"));
}

}  // namespace zerotrain::comm::detail
