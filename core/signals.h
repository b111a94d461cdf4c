// Signal names for options such as dlrun's --ckpt-signal.
#pragma once

#include <string>
#include <string_view>

namespace dl {

// "USR2", "SIGUSR2" or "12" -> 12; "none" -> 0. Throws dl::InputError naming the option
// and the value.
int parse_signal(std::string_view option, std::string_view text);

// 12 -> "SIGUSR2"; "signal 42" for one without a name.
std::string signal_name(int sig);

// Whether the text of /proc/<pid>/status says the process ignores `sig` (its SigIgn
// mask). False when the line is missing or malformed.
bool status_ignores(std::string_view proc_status, int sig);

}  // namespace dl
