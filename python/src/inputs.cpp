// The engine's other inputs as the command line reads them, for the Python package: sizes
// ("5GB", "16G", "1,000") and the device a rank trains on (trainer/device.h).
#include "bindings.h"
#include "config_handle.h"
#include "zerotrain/comm/communicator.h"
#include "zerotrain/comm/rendezvous/rendezvous.h"
#include "zerotrain/core/env.h"
#include "zerotrain/core/strings.h"
#include "zerotrain/trainer/device.h"

namespace zerotrain::python {

void bind_inputs(py::module_& m) {
  m.def("parse_bytes", [](const py::object& size, const std::string& what) -> int64_t {
    if (py::isinstance<py::int_>(size) && !py::isinstance<py::bool_>(size)) {
      const int64_t bytes = size.cast<int64_t>();
      ZT_CHECK(bytes >= 0, UsageError, what, ": ", bytes, " is not a size; give a non-negative number of bytes");
      return bytes;
    }
    ZT_CHECK(py::isinstance<py::str>(size), UsageError, what, ": give bytes or a size such as \"5GB\", not a ",
             py::str(py::type::of(size).attr("__name__")).cast<std::string>());
    return strings::parse_bytes(size.cast<std::string>(), what);
  }, py::arg("size"), py::arg("what"),
  "Bytes from an int or a size string, as the command line reads one (KB = 1000 bytes, KiB and K = 1024).");

  m.def("training_device", [](const std::string& current, const ConfigHandle& config) {
    // Parameters already on an accelerator stay there: the engine trains where they are.
    if (!c10::Device(current).is_cpu()) return current;
    trainer::DeviceRequest request;
    request.flag = env::get("ZEROTRAIN_DEVICE").value_or("auto");
    request.origin = "ZEROTRAIN_DEVICE";
    const comm::RendezvousInfo where = comm::rendezvous_from_env();
    request.local_rank = where.local_rank;
    request.local_world_size = where.local_world_size;
    request.nccl = comm::apply_env(comm::options_from_config(config.config)).backend == comm::BackendKind::kNccl;
    return trainer::choose_device(request).device.str();
  }, py::arg("current"), py::arg("config"),
  "The device a model whose parameters are on `current` trains on: there, if not the CPU; else LOCAL_RANK's GPU when "
  "GPUs are visible and ZEROTRAIN_DEVICE (auto, cpu, cuda, cuda:N) allows, as `zerotrain train --device` chooses.");
}

}  // namespace zerotrain::python
