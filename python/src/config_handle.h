// A ds_config as the Python package holds it (zerotrain._C.Config): read and checked once by
// the C++ reader, then handed back to the engine, zero.Init and the HF classes as it is, so
// Python never parses a config or answers a question about one by itself (docs/python.md).
#pragma once

#include <memory>
#include <string>

#include "bindings.h"
#include "zerotrain/config/config.h"

namespace zerotrain::python {

struct ConfigHandle {
  config::Config config;   // typed, checked, "auto" values possibly still pending
  config::Json raw;        // the JSON it was read from, for scripts that read their config as a dict
  std::string origin;      // the file, or "<config dict>", in messages
};
using ConfigPtr = std::shared_ptr<ConfigHandle>;

// zerotrain._C.Config and the conversions between JSON and Python objects (config.cpp).
void bind_config(py::module_& m);

}  // namespace zerotrain::python
