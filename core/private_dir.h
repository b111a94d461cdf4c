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
// itself must exist and is opened as given (it is the site's or the user's choice); it,
// and every directory or link on its path, must belong to root or the user (the owner of
// a directory may rename anything in it, sticky bit or not); a directory above it that
// others may write to, and the root itself, must then have the sticky bit. Every component below it
// is opened with O_NOFOLLOW, so a planted symlink is refused, and must belong to the user or root
// and not be writable by group or others (`dir` itself must be the user's): otherwise another user
// could rename or replace the job's directory. Missing components are created with mode 0700, after
// every existing one above passed. Throws dl::InputError (outside the roots, a symlink, not a
// directory, someone else's or a shared-writable directory: naming the path and its owner) or
// dl::SystemError (the call that failed and errno), each naming the path.
void ensure_private_dir(const std::string& dir, const std::vector<std::string>& roots);

// The same checks for user `uid`, creating nothing: for the part of `dir` that exists
// (a missing root or component ends the check without error). Used at submit time.
void check_private_path(const std::string& dir, const std::vector<std::string>& roots, uid_t uid);

// The checks of the root alone, for user `uid` (dl-exp's experiments root): `root`, and
// every directory or link on its path, belongs to root or `uid`, and a directory above
// it that others may write to has the sticky bit. A missing root passes.
void check_root(const std::string& root, uid_t uid);

// Creates the site's shared root `root` when it is missing (its parent must exist), as
// the caller (root, in slurmd) with mode 1777 like /tmp: otherwise the first user to
// create it would own it. An existing `root`, or a directory or link above it, of an
// owner other than the caller or root is an InputError, as in check_root.
void make_shared_root(const std::string& root);

}  // namespace dl
