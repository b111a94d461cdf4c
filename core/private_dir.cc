#include "core/private_dir.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/parse.h"
#include "core/sysio.h"
#include "core/user_db.h"

namespace dl {
namespace {

std::vector<std::string> components(const std::string& path) {
  const auto parts = path_components(path);
  return {parts.begin(), parts.end()};
}

std::string join_path(const std::vector<std::string>& parts, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += "/" + parts[i];
  return out.empty() ? "/" : out;
}

[[noreturn]] void fail_errno(const char* call, const std::string& path) {
  throw SystemError(fmt::format("couldn't {} {}: {}", call, path, std::strerror(errno)));
}

// Another user who owns a directory on the way, or may write to it, could rename or
// replace what lies below it (the job's directory) between checks and uses.
void check_component(const struct stat& st, const std::string& path, uid_t uid, bool last) {
  if (last ? st.st_uid != uid : st.st_uid != uid && st.st_uid != 0) {
    throw InputError(fmt::format("{} belongs to {}, not to the job's user {}; refusing to use it",
                                 path, describe_user(st.st_uid), describe_user(uid)));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    throw InputError(fmt::format(
        "{} (owner {}, mode {:04o}) is writable by other users; refusing to use it (chmod go-w)",
        path, describe_user(st.st_uid), st.st_mode & 07777));
  }
}

// The owner of a root, or of a directory or link above it, may rename what lies below
// it (sticky bit or not) and put a directory of their own in the place of the user's.
void check_root_owner(const std::string& path, uid_t owner, uid_t uid) {
  if (owner == 0 || owner == uid) return;
  throw InputError(fmt::format(
      "{} belongs to {}, {}: its owner could replace what lies below it; refusing to use it "
      "as a root (an administrator must remove it or chown it to root)",
      path, describe_user(owner),
      uid == 0 ? std::string("not to root") : "neither root nor " + describe_user(uid)));
}

// The root's path as given, component by component (lstat: a link is judged by its own
// owner). Returns false when a component is missing.
bool check_above_root(const std::vector<std::string>& target, std::size_t root_len, uid_t uid) {
  for (std::size_t i = 1; i <= root_len; ++i) {
    const std::string path = join_path(target, i);
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) return false;
      fail_errno("stat", path);
    }
    check_root_owner(path, st.st_uid, uid);
    if (i < root_len && S_ISDIR(st.st_mode) && (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 &&
        (st.st_mode & S_ISVTX) == 0) {
      throw InputError(fmt::format(
          "{} (owner {}, mode {:04o}), above the root {}, is writable by other users without "
          "the sticky bit; an administrator must chmod +t or go-w it",
          path, describe_user(st.st_uid), st.st_mode & 07777, join_path(target, root_len)));
    }
  }
  return true;
}

// Walks `dir` below the deepest of `roots` that contains it. Every component below the
// root must be a real directory (a symlink is refused), owned by `uid` or root and not
// writable by others; `dir` itself must be `uid`'s. With `create`, missing components
// are made with mode 0700 (as the effective user); without, the walk stops at the
// first missing one.
void walk(const std::string& dir, const std::vector<std::string>& roots, uid_t uid, bool create) {
  const auto target = components(dir);
  // The deepest root that contains the target.
  std::size_t root_len = 0;
  bool found = false;
  for (const auto& root : roots) {
    const auto rc = components(root);
    if (rc.size() <= target.size() && std::equal(rc.begin(), rc.end(), target.begin()) &&
        (!found || rc.size() > root_len)) {
      root_len = rc.size();
      found = true;
    }
  }
  if (dir.empty() || dir.front() != '/' || !found) {
    std::string list;
    for (const auto& r : roots) list += (list.empty() ? "" : ", ") + r;
    throw InputError(fmt::format("{}: not under an allowed checkpoint root ({})", dir, list));
  }

  const std::string root = join_path(target, root_len);
  if (!check_above_root(target, root_len, uid) && !create) return;
  sys::Fd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) {
      if (!create) return;
      throw InputError(
          fmt::format("checkpoint root {} does not exist (an administrator must "
                      "create it)",
                      root));
    }
    fail_errno("open", root);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) fail_errno("stat", root);
  check_root_owner(root, st.st_uid, uid);
  // The root is the site's (or the user's home): writable by others only with the
  // sticky bit, which keeps them from renaming or removing what is not theirs.
  if (root_len < target.size() && (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 &&
      (st.st_mode & S_ISVTX) == 0) {
    throw InputError(fmt::format(
        "checkpoint root {} (owner {}, mode {:04o}) is writable by other users without the "
        "sticky bit; an administrator must chmod +t or go-w it",
        root, describe_user(st.st_uid), st.st_mode & 07777));
  }
  for (std::size_t i = root_len; i < target.size(); ++i) {
    const std::string& name = target[i];
    const std::string path = join_path(target, i + 1);
    if (create) {
      if (::mkdirat(fd.get(), name.c_str(), 0700) != 0 && errno != EEXIST) {
        fail_errno("create directory", path);
      }
    }
    sys::Fd next(::openat(fd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) {
      const int err = errno;
      struct stat lst;
      if (::fstatat(fd.get(), name.c_str(), &lst, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISLNK(lst.st_mode)) {
          throw InputError(fmt::format("{} is a symbolic link (owner {}); refusing to follow it",
                                       path, describe_user(lst.st_uid)));
        }
        if (!S_ISDIR(lst.st_mode)) throw InputError(fmt::format("{} is not a directory", path));
      }
      if (!create && err == ENOENT) return;
      errno = err;
      fail_errno("open", path);
    }
    fd = std::move(next);
    if (::fstat(fd.get(), &st) != 0) fail_errno("stat", path);
    check_component(st, path, uid, i + 1 == target.size());
  }
  if (root_len == target.size() && st.st_uid != uid) {
    throw InputError(fmt::format("{} belongs to {}, not to the job's user {}", dir,
                                 describe_user(st.st_uid), describe_user(uid)));
  }
}

}  // namespace

void ensure_private_dir(const std::string& dir, const std::vector<std::string>& roots) {
  walk(dir, roots, ::geteuid(), true);
}

void check_private_path(const std::string& dir, const std::vector<std::string>& roots, uid_t uid) {
  walk(dir, roots, uid, false);
}

void check_root(const std::string& root, uid_t uid) {
  const auto target = components(root);
  if (!check_above_root(target, target.size(), uid)) return;
  struct stat st;
  if (::stat(root.c_str(), &st) != 0) fail_errno("stat", root);
  check_root_owner(root, st.st_uid, uid);
}

void make_shared_root(const std::string& root) {
  check_root(root, ::geteuid());
  if (::mkdir(root.c_str(), 0700) != 0) {
    if (errno != EEXIST) fail_errno("create directory", root);
    check_root(root, ::geteuid());  // made meanwhile
    return;
  }
  // 0700 until it is ours for sure; the umask would take the mode bits of mkdir anyway.
  sys::Fd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) fail_errno("open", root);
  if (::fchmod(fd.get(), 01777) != 0) fail_errno("chmod", root);
}

}  // namespace dl
