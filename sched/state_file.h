// A small state file that survives crashes: written to a temporary file, fsync'ed,
// renamed over the old one (which is kept as <path>.old), and the directory fsync'ed.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace dl::sched {

// Throws dl::SystemError naming the path and the call that failed.
void save_durably(const std::string& path, const std::string& text);

// The contents of <path>, or nullopt when it does not exist; then <path>.old is the
// caller's fallback (read_file(path + ".old")).
std::optional<std::string> read_file(const std::string& path);

struct LoadedState {
  std::string path;  // the copy it came from
  std::string text;
};

// The newest good copy of a state file: <path> if `check` accepts it (returns without
// throwing), else <path>.old. A save killed between its two renames leaves only
// <path>.old; a corrupt <path> is skipped. `complain` hears about each copy that could
// not be used (path, why). nullopt when there is no good copy.
std::optional<LoadedState> load_newest_good(
    const std::string& path, const std::function<void(const std::string&)>& check,
    const std::function<void(const std::string&, const std::string&)>& complain);

}  // namespace dl::sched
