// What the command prints for an exception that zerotrain did not raise on purpose:
// LibTorch's c10 errors lose their C++ backtrace (ZEROTRAIN_DEBUG=1 keeps it), and running
// out of memory becomes a ResourceError that says what to do.
#pragma once

#include <exception>
#include <memory>

#include "zerotrain/core/error.h"

namespace zerotrain::tools {

// The exception `error`, which is not a zerotrain::Error, as one: c10's out-of-memory and
// std::bad_alloc as ResourceError, other c10 errors as an Error tagged [libtorch] with the
// message alone, anything else as an InternalError (a bug).
std::unique_ptr<Error> as_typed_error(const std::exception_ptr& error);

}  // namespace zerotrain::tools
