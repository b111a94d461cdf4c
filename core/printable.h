// Text from other people (job names and comments, journal strings) made safe to print on
// a terminal: control characters become visible escapes instead of commands to the
// terminal (clearing the screen, setting the window title, faking other output). Every
// table a tool prints goes through it.
#pragma once

#include <string>
#include <string_view>

namespace dl {

// `text` with every control character written as an escape: \t \n \r as such, other
// C0 characters, DEL, the C1 controls (U+0080..U+009F) and bytes that are not valid
// UTF-8 as \xHH (one per byte). A backslash stays as it is; valid printable UTF-8
// passes unchanged.
std::string printable(std::string_view text);

}  // namespace dl
