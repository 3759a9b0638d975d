// The script's torch.distributed process group as the engine's communicator
// (comm/process_group/process_group.h): whether the engine runs its collectives on it or opens
// its own group is decided here, once, for initialize and zero.Init alike (python/zerotrain/comm
// only fetches torch's default group and store and passes them in).
#pragma once

#include <optional>
#include <string>

#include "bindings.h"
#include "zerotrain/comm/communicator.h"
#include "zerotrain/config/config.h"

namespace zerotrain::python {

// Why the engine opens its own group instead of running on `group` (torch.distributed's
// default group, or None when torch.distributed is not initialised), or nullopt when it
// adopts it: the job names a backend (the config's "comm" block, or ZEROTRAIN_COMM_BACKEND
// other than "auto"), the group is not this job's (another rank or size than the launcher's
// environment says), or it has no backend for `device`'s tensors.
std::optional<std::string> reason_to_open_own_group(const py::object& group, const std::string& device,
                                                    const Config& config);

// The communicator the engine runs on: the script's group when reason_to_open_own_group
// says so (`store`: its store, or None), nullopt for the engine's own.
std::optional<comm::Communicator> adopt_group(const py::object& group, const py::object& store,
                                              const std::string& device, const Config& config);

// _C.reason_to_open_own_group for python/zerotrain/comm (its log line and exit handler).
void bind_group(py::module_& m);

}  // namespace zerotrain::python
