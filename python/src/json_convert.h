// JSON values <-> Python objects, value by value (no text in between, so nothing is parsed
// twice): dicts, lists, strings, bools, ints, finite floats and None.
#pragma once

#include <string_view>

#include "bindings.h"
#include "zerotrain/config/json_text.h"

namespace zerotrain::python {

py::object to_python(const config::Json& value);
// ConfigError naming `what` and the path of the first value that is not plain data (a
// tensor, a set, NaN, a key that is not a string).
config::Json to_json(const py::handle& value, std::string_view what);

}  // namespace zerotrain::python
