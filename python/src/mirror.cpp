#include "mirror.h"

#include "bindings.h"
#include "zerotrain/core/error.h"
#include "zerotrain/stages/stage3/sharded.h"

namespace zerotrain::python {
namespace {

class PlainMirror final : public torch::nn::Module {};
class UnitMirror final : public ShardedModule {};

ShardedModule& unit_of(Mirror& m) {
  ZT_CHECK(m.unit != nullptr, InternalError, "a module mirror that is not a ZeRO-3 unit was driven as one");
  return *m.unit;
}

}  // namespace

void bind_mirror(py::module_& m) {
  py::class_<Mirror, std::shared_ptr<Mirror>>(m, "ModuleMirror",
      "A C++ module registering a Python module's own parameters and buffers (the same tensors).")
      .def(py::init([](bool unit) {
             auto mirror = std::make_shared<Mirror>();
             if (unit) {
               auto u = std::make_shared<UnitMirror>();
               mirror->unit = u.get();
               mirror->module = std::move(u);
             } else {
               mirror->module = std::make_shared<PlainMirror>();
             }
             return mirror;
           }),
           py::arg("unit") = false)
      .def("add_parameter",
           [](Mirror& self, const std::string& name, const at::Tensor& tensor) {
             // requires_grad as it is: a frozen parameter stays frozen.
             self.module->register_parameter(name, tensor, tensor.requires_grad());
           })
      .def("add_buffer", [](Mirror& self, const std::string& name,
                            const at::Tensor& tensor) { self.module->register_buffer(name, tensor); })
      .def("add_external_parameter", [](Mirror& self, const at::Tensor& param) { unit_of(self).add_external_parameter(param); })
      .def("add_child", [](Mirror& self, const std::string& name,
                           const Mirror& child) { self.module->register_module(name, child.module); })
      .def("enter_forward",
           [](Mirror& self) {
             py::gil_scoped_release no_gil;   // gathers are collectives
             unit_of(self).enter_forward();
           })
      .def("leave_forward",
           [](Mirror& self) {
             py::gil_scoped_release no_gil;
             unit_of(self).leave_forward();
           })
      .def("arm", [](Mirror& self, const at::Tensor& out) { return unit_of(self).arm_output(out); },
           "The output through an autograd node whose backward gathers the unit again.");
}

}  // namespace zerotrain::python
