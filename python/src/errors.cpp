// zerotrain's C++ errors raised in Python as the classes of zerotrain/errors.py, each a
// subclass of zerotrain.Error and of the closest built-in (ValueError, RuntimeError, OSError,
// MemoryError). The "[component]" a message starts with is the C++ error's, for errors
// raised in C++ and in Python alike: zerotrain.errors takes each class's component from
// error_components() below, so no prefix is typed by hand on either side.
#include "bindings.h"

#include "zerotrain/core/error.h"

namespace zerotrain::python {
namespace {

void raise_as(const char* class_name, const Error& e) {
  // The classes live in Python; importing here (the GIL is held) also works before the
  // package finished importing, since zerotrain.errors has no imports of its own.
  py::object cls = py::module_::import("zerotrain.errors").attr(class_name);
  py::object error = cls(e.message(), e.component());
  PyErr_SetObject(cls.ptr(), error.ptr());
}

}  // namespace

void bind_errors(py::module_& m) {
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    // Most derived first.
    try {
      std::rethrow_exception(p);
    } catch (const ConfigError& e) {
      raise_as("ConfigError", e);
    } catch (const UsageError& e) {
      raise_as("UsageError", e);
    } catch (const NotSupported& e) {
      raise_as("NotSupportedError", e);
    } catch (const TimeoutError& e) {
      raise_as("CommTimeoutError", e);
    } catch (const CommError& e) {
      raise_as("CommError", e);
    } catch (const CheckpointError& e) {
      raise_as("CheckpointError", e);
    } catch (const IoError& e) {
      raise_as("IoError", e);
    } catch (const NumericsError& e) {
      raise_as("NumericsError", e);
    } catch (const ResourceError& e) {
      raise_as("ResourceError", e);
    } catch (const InternalError& e) {
      raise_as("InternalError", e);
    } catch (const Error& e) {
      raise_as("Error", e);
    }
  });
  m.def("error_components", [] {
    py::dict d;
    d["ConfigError"] = ConfigError("").component();
    d["UsageError"] = UsageError("").component();
    d["NotSupportedError"] = NotSupported("").component();
    d["CommTimeoutError"] = TimeoutError("").component();
    d["CommError"] = CommError("").component();
    d["CheckpointError"] = CheckpointError("").component();
    d["IoError"] = IoError("").component();
    d["NumericsError"] = NumericsError("").component();
    d["ResourceError"] = ResourceError("").component();
    d["InternalError"] = InternalError("").component();
    return d;
  }, "{zerotrain.errors class name: the [component] of the C++ error it stands for}.");
  m.def("_raise_for_test", [](const std::string& kind, const std::string& message) {
    if (kind == "config") throw ConfigError(message);
    if (kind == "usage") throw UsageError(message);
    if (kind == "not_supported") throw NotSupported(message);
    if (kind == "timeout") throw TimeoutError(message);
    if (kind == "comm") throw CommError(message);
    if (kind == "checkpoint") throw CheckpointError(message);
    if (kind == "io") throw IoError(message);
    if (kind == "numerics") throw NumericsError(message);
    if (kind == "resource") throw ResourceError(message);
    throw InternalError(message);
  }, "Throws the C++ error of `kind` (tests of the translation).");
}

}  // namespace zerotrain::python
