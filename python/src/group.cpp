#include "group.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "config_handle.h"
#include "zerotrain/comm/process_group/process_group.h"
#include "zerotrain/comm/rendezvous/rendezvous.h"
#include "zerotrain/core/error.h"

namespace zerotrain::python {
namespace {

// torch registers ProcessGroup and Store with pybind11 under intrusive_ptr holders.
c10::intrusive_ptr<c10d::ProcessGroup> process_group(const py::object& group) {
  return group.cast<c10::intrusive_ptr<c10d::ProcessGroup>>();
}

}  // namespace

std::optional<std::string> reason_to_open_own_group(const py::object& group, const std::string& device,
                                                    const Config& config) {
  if (group.is_none()) return "torch.distributed is not initialised";
  const comm::CommOptions options = comm::apply_env(comm::options_from_config(config));
  if (options.backend != comm::BackendKind::kAuto) {
    return detail::str("the job names the \"", comm::to_string(options.backend), "\" backend");
  }
  const auto pg = process_group(group);
  const comm::RendezvousInfo where = comm::rendezvous_from_env();
  if (pg->getSize() != where.world_size || pg->getRank() != where.rank) {
    return detail::str("torch.distributed's group is rank ", pg->getRank(), " of ", pg->getSize(),
                       ", but the launcher's environment says rank ", where.rank, " of ", where.world_size);
  }
  const c10::DeviceType wanted = c10::Device(device).type();
  bool served = false;
  for (const c10::Device& d : pg->getDeviceTypes()) served = served || d.type() == wanted;
  if (!served) {
    return detail::str("torch.distributed's group (", pg->getBackendName(), ") has no backend for ", device,
                       " tensors");
  }
  return std::nullopt;
}

std::optional<comm::Communicator> adopt_group(const py::object& group, const py::object& store,
                                              const std::string& device, const Config& config) {
  if (reason_to_open_own_group(group, device, config)) return std::nullopt;
  comm::AdoptedGroup adopted;
  adopted.group = process_group(group);
  if (!store.is_none()) adopted.store = store.cast<c10::intrusive_ptr<c10d::Store>>();
  return comm::adopt_process_group(std::move(adopted), at::Device(device),
                                   comm::apply_env(comm::options_from_config(config)));
}

void bind_group(py::module_& m) {
  m.def("reason_to_open_own_group", [](const py::object& group, const std::string& device, const ConfigHandle& c) {
    return reason_to_open_own_group(group, device, c.config);
  }, py::arg("group"), py::arg("device"), py::arg("config"),
  "Why the engine would open its own process group rather than run on torch.distributed's `group` (None: it "
  "adopts it).");
}

}  // namespace zerotrain::python
