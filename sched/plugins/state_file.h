// A small state file that survives crashes: written to a temporary file, fsync'ed,
// renamed over the old one (which is kept as <path>.old), and the directory fsync'ed.
#pragma once

#include <optional>
#include <string>

namespace dl::sched {

// Throws dl::SystemError naming the path and the call that failed.
void save_durably(const std::string& path, const std::string& text);

// The contents of <path>, or nullopt when it does not exist; then <path>.old is the
// caller's fallback (read_file(path + ".old")).
std::optional<std::string> read_file(const std::string& path);

}  // namespace dl::sched
