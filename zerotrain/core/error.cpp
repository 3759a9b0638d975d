#include "zerotrain/core/error.h"

namespace zerotrain {

Error::Error(std::string component, const std::string& message)
    : std::runtime_error("[" + component + "] " + message),
      component_(std::move(component)),
      message_(message) {}

namespace detail {
void throw_internal(const char* file, int line, const char* cond, const std::string& msg) {
  throw InternalError(str("internal assertion `", cond, "` failed at ", file, ":", line,
                          msg.empty() ? "" : ": ", msg,
                          ". This is a zerotrain bug; please report it with this message."));
}
}  // namespace detail

}  // namespace zerotrain
