// Text from outside (a path, a flag's value, a key of a config file, a line of a hostfile) made
// safe to print: every zerotrain::Error passes its message through escape_for_display, so a
// message shows such text whole and as it is, and cannot drive the terminal that shows it.
#pragma once

#include <string>
#include <string_view>

namespace zerotrain::strings {

// `text` with what a terminal would act on, or what would cut or hide part of it, written as
// visible escapes:
//   - control bytes (NUL, ESC, CR, backspace, DEL ...) as \x00, \x1b, \x0d, \x08, \x7f;
//     newline and tab stay, since messages use them for layout;
//   - C1 controls (U+0080..U+009F: U+009B starts a terminal command like ESC [) and the
//     Unicode controls that reorder or split what is shown (bidirectional overrides and
//     isolates, line and paragraph separators) as \u009b, \u202e ...;
//   - each byte that is not part of valid UTF-8 as \xNN.
// Everything else, valid UTF-8 included, is kept. The result is plain ASCII or valid UTF-8
// and escaping it again changes nothing.
std::string escape_for_display(std::string_view text);

}  // namespace zerotrain::strings
