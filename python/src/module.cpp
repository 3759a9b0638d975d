// zerotrain._C: the C++ engine under the Python package (python/zerotrain, docs/python.md).
#include "bindings.h"

#include "zerotrain/core/logging.h"
#include "zerotrain/version.h"

namespace zerotrain::python {

py::object json_to_python(const std::string& text) { return py::module_::import("json").attr("loads")(text); }

std::string python_to_json(const py::handle& value) {
  return py::module_::import("json").attr("dumps")(value).cast<std::string>();
}

}  // namespace zerotrain::python

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
  zerotrain::python::bind_trainer_args(m);
}
