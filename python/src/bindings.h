// The pieces of the extension module zerotrain._C (docs/python.md), one file each. Every
// file that includes this one compiles against torch's Python headers, so they are few.
#pragma once

#include <torch/extension.h>

namespace zerotrain::python {

namespace py = pybind11;

// zerotrain's typed C++ errors as the Python classes of zerotrain.errors (errors.cpp).
void bind_errors(py::module_& m);
// The C++ mirror of a Python module tree that the engine trains (mirror.cpp).
void bind_mirror(py::module_& m);
// initialize, the Engine, GatheredParameters, ZeroInit (engine.cpp).
void bind_engine(py::module_& m);
// zero.Init's parameter cutter (zero_init.cpp).
void bind_zero_init(py::module_& m);
// The estimators, checkpoint reading and consolidation, config checking, facts (tools.cpp).
void bind_tools(py::module_& m);
// A Hugging Face folder's safetensors weights, read by ranges (hf_weights.cpp).
void bind_hf_weights(py::module_& m);
// Sizes and the training device, read as the command line reads them (inputs.cpp).
void bind_inputs(py::module_& m);

}  // namespace zerotrain::python
