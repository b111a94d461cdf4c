#include "core/private_dir.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/parse.h"
#include "core/unique_fd.h"

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

}  // namespace

void ensure_private_dir(const std::string& dir, const std::vector<std::string>& roots) {
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
  UniqueFd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) {
      throw InputError(
          fmt::format("checkpoint root {} does not exist (an administrator must "
                      "create it)",
                      root));
    }
    fail_errno("open", root);
  }
  for (std::size_t i = root_len; i < target.size(); ++i) {
    const std::string& name = target[i];
    const std::string path = join_path(target, i + 1);
    if (::mkdirat(fd.get(), name.c_str(), 0700) != 0 && errno != EEXIST) {
      fail_errno("create directory", path);
    }
    UniqueFd next(
        ::openat(fd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) {
      const int err = errno;
      struct stat st;
      if (::fstatat(fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISLNK(st.st_mode)) {
          throw InputError(fmt::format("{} is a symbolic link; refusing to follow it", path));
        }
        if (!S_ISDIR(st.st_mode)) throw InputError(fmt::format("{} is not a directory", path));
      }
      errno = err;
      fail_errno("open", path);
    }
    fd = std::move(next);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) fail_errno("stat", dir);
  if (st.st_uid != ::geteuid()) {
    throw InputError(fmt::format("{} belongs to uid {}, not to the job's user (uid {})", dir,
                                 st.st_uid, ::geteuid()));
  }
}

}  // namespace dl
