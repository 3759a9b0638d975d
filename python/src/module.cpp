// zerotrain._C: the C++ engine under the Python package (python/zerotrain, docs/python.md).
#include "bindings.h"
#include "config_handle.h"
#include "group.h"

#include "zerotrain/core/logging.h"
#include "zerotrain/version.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "zerotrain's C++ engine (ZeRO stages 0-3, offload, checkpoints) for the zerotrain package";
  m.attr("__version__") = ZEROTRAIN_VERSION;
  // The package's own messages, in the engine's log (its format, its level: ZEROTRAIN_LOG_LEVEL).
  m.def("log_info", [](const std::string& text) { ZT_LOG_INFO(text); }, py::arg("text"));
  zerotrain::python::bind_errors(m);
  zerotrain::python::bind_mirror(m);
  zerotrain::python::bind_engine(m);
  zerotrain::python::bind_zero_init(m);
  zerotrain::python::bind_tools(m);
  zerotrain::python::bind_config(m);
  zerotrain::python::bind_group(m);
  zerotrain::python::bind_hf_weights(m);
  zerotrain::python::bind_inputs(m);
}
