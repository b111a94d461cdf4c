// Creates a directory for the calling user without following symlinks below a
// trusted root. slurmstepd calls it with the job user's effective ids, so what it
// creates belongs to the user.
#pragma once

#include <string>
#include <vector>

namespace dl {

// Ensures `dir` exists as a directory owned by the effective user. `dir` must lie
// under one of `roots` (absolute paths, compared by whole components); the root
// itself must exist and is opened as given (it is the site's or the user's choice),
// every component below it is opened with O_NOFOLLOW, so a planted symlink is
// refused. Missing components are created with mode 0700. Throws dl::InputError
// (outside the roots, a symlink, not a directory, someone else's directory) or
// dl::SystemError (the call that failed and errno), each naming the path.
void ensure_private_dir(const std::string& dir, const std::vector<std::string>& roots);

}  // namespace dl
