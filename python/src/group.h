// The script's torch.distributed process group as the engine's communicator
// (comm/process_group/process_group.h): python/zerotrain/comm decides when to adopt it and
// passes it here.
#pragma once

#include <optional>
#include <string>

#include "bindings.h"
#include "zerotrain/comm/communicator.h"
#include "zerotrain/config/config.h"

namespace zerotrain::python {

// `group`: a torch.distributed ProcessGroup, or None (then nullopt: the engine opens its
// own); `store`: its store, or None. The config's "comm" block gives the timeout and checks.
std::optional<comm::Communicator> adopt_group(const py::object& group, const py::object& store,
                                              const std::string& device, const Config& config);

}  // namespace zerotrain::python
