#include "group.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "zerotrain/comm/process_group/process_group.h"
#include "zerotrain/core/error.h"

namespace zerotrain::python {

std::optional<comm::Communicator> adopt_group(const py::object& group, const py::object& store,
                                              const std::string& device, const Config& config) {
  if (group.is_none()) return std::nullopt;
  comm::AdoptedGroup adopted;
  // torch registers ProcessGroup and Store with pybind11 under intrusive_ptr holders.
  adopted.group = group.cast<c10::intrusive_ptr<c10d::ProcessGroup>>();
  if (!store.is_none()) adopted.store = store.cast<c10::intrusive_ptr<c10d::Store>>();
  return comm::adopt_process_group(std::move(adopted), at::Device(device),
                                   comm::apply_env(comm::options_from_config(config)));
}

}  // namespace zerotrain::python
