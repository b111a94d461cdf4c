// Creates a directory for the calling user without following symlinks below a
// trusted root. slurmstepd calls it with the job user's effective ids, so what it
// creates belongs to the user.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace dl {

// Ensures `dir` exists as a directory owned by the effective user. `dir` must lie
// under one of `roots` (absolute paths, compared by whole components); the root
// itself must exist and is opened as given (it is the site's or the user's choice) and,
// if others may write to it, must have the sticky bit. Every component below it is
// opened with O_NOFOLLOW, so a planted symlink is refused, and must belong to the user
// or root and not be writable by group or others (`dir` itself must be the user's):
// otherwise another user could rename or replace the job's directory. Missing
// components are created with mode 0700, after every existing one above passed. Throws
// dl::InputError (outside the roots, a symlink, not a directory, someone else's or a
// shared-writable directory: naming the path and its owner) or dl::SystemError (the
// call that failed and errno), each naming the path.
void ensure_private_dir(const std::string& dir, const std::vector<std::string>& roots);

// The same checks for user `uid`, creating nothing: for the part of `dir` that exists
// (a missing root or component ends the check without error). Used at submit time.
void check_private_path(const std::string& dir, const std::vector<std::string>& roots, uid_t uid);

}  // namespace dl
