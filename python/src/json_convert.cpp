#include "json_convert.h"

#include <cmath>

#include "zerotrain/core/error.h"

namespace zerotrain::python {
namespace {

config::Json convert(const py::handle& v, std::string_view what, const std::string& path, int depth) {
  ZT_CHECK(depth <= static_cast<int>(config::kMaxJsonDepth), ConfigError, what, ": nested deeper than ",
           config::kMaxJsonDepth, " levels at ", path);
  if (v.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(v)) return v.cast<bool>();
  if (py::isinstance<py::int_>(v)) {
    try {
      return v.cast<int64_t>();
    } catch (const py::cast_error&) {
      throw ConfigError(detail::str(what, ": ", path, " is an integer too large for 64 bits"));
    }
  }
  if (py::isinstance<py::float_>(v)) {
    const double d = v.cast<double>();
    ZT_CHECK(std::isfinite(d), ConfigError, what, ": ", path, " is ", d, ", which JSON cannot hold; give a finite "
             "number");
    return d;
  }
  if (py::isinstance<py::str>(v)) return v.cast<std::string>();
  if (py::isinstance<py::dict>(v)) {
    config::Json out = config::Json::object();
    for (const auto& [key, item] : v.cast<py::dict>()) {
      ZT_CHECK(py::isinstance<py::str>(key), ConfigError, what, ": ", path, " has the key ",
               py::repr(key).cast<std::string>(), "; JSON keys are strings");
      const std::string name = key.cast<std::string>();
      out[name] = convert(item, what, path.empty() ? name : path + "." + name, depth + 1);
    }
    return out;
  }
  if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
    config::Json out = config::Json::array();
    size_t i = 0;
    for (const auto& item : v) out.push_back(convert(item, what, detail::str(path, "[", i++, "]"), depth + 1));
    return out;
  }
  throw ConfigError(detail::str(what, ": ", path.empty() ? std::string("the value") : path, " is a ",
                                py::str(py::type::of(v).attr("__name__")).cast<std::string>(),
                                ", which JSON cannot hold; give plain numbers, strings, lists and dicts"));
}

}  // namespace

py::object to_python(const config::Json& value) {
  switch (value.type()) {
    case config::Json::value_t::null: return py::none();
    case config::Json::value_t::boolean: return py::bool_(value.get<bool>());
    case config::Json::value_t::number_integer: return py::int_(value.get<int64_t>());
    case config::Json::value_t::number_unsigned: return py::int_(value.get<uint64_t>());
    case config::Json::value_t::number_float: return py::float_(value.get<double>());
    case config::Json::value_t::string: return py::str(value.get<std::string>());
    case config::Json::value_t::array: {
      py::list out;
      for (const auto& item : value) out.append(to_python(item));
      return out;
    }
    case config::Json::value_t::object: {
      py::dict out;
      for (const auto& [key, item] : value.items()) out[py::str(key)] = to_python(item);
      return out;
    }
    default: throw InternalError("a JSON value of a kind the package does not convert");
  }
}

config::Json to_json(const py::handle& value, std::string_view what) { return convert(value, what, "", 0); }

}  // namespace zerotrain::python
