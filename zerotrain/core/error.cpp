#include "zerotrain/core/error.h"

#include "zerotrain/core/escape.h"

namespace zerotrain {

// Messages quote what users give (paths, flag values, keys and lines of their files), and
// what() is a C string that a terminal shows: escaping here, once for every error, keeps a
// NUL from cutting the message and an escape sequence from driving the terminal, whatever
// the message quotes and wherever it was built.
Error::Error(std::string component, const std::string& message)
    : std::runtime_error("[" + strings::escape_for_display(component) + "] " + strings::escape_for_display(message)),
      component_(strings::escape_for_display(component)),
      message_(strings::escape_for_display(message)) {}

namespace detail {
void throw_internal(const char* file, int line, const char* cond, const std::string& msg) {
  throw InternalError(str("internal assertion `", cond, "` failed at ", file, ":", line,
                          msg.empty() ? "" : ": ", msg,
                          ". This is a zerotrain bug; please report it with this message."));
}
}  // namespace detail

}  // namespace zerotrain
