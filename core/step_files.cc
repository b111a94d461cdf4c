#include "core/step_files.h"

#include <fcntl.h>
#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/sysio.h"

namespace dl {
namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (const char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

bool short_hex(std::string_view s) {
  if (s.empty() || s.size() > 16) return false;
  for (const char c : s) {
    if ((c < '0' || c > '9') && (c < 'a' || c > 'f')) return false;
  }
  return true;
}

// "<rank>-<suffix>".
bool is_rank_and_suffix(std::string_view rest) {
  const auto dash = rest.find('-');
  return dash != std::string_view::npos && all_digits(rest.substr(0, dash)) &&
         short_hex(rest.substr(dash + 1));
}

}  // namespace

std::string channel_file_prefix(std::string_view job, std::string_view step) {
  return fmt::format("dlrun-{}.{}-", job, step);
}

std::string channel_file_stem(std::string_view job, std::string_view step, long rank) {
  return fmt::format("{}{}-", channel_file_prefix(job, step), rank);
}

bool removable_channel_file(const struct stat& dir, std::string_view name, const struct stat& file,
                            std::string_view prefix, uid_t uid) {
  if (name.substr(0, prefix.size()) != prefix || !is_rank_and_suffix(name.substr(prefix.size()))) {
    return false;
  }
  if (!S_ISREG(file.st_mode) || file.st_uid != uid) return false;
  const bool users_own = dir.st_uid == uid;
  const bool shared_sticky =
      (dir.st_mode & (S_ISVTX | S_IWOTH | S_IXOTH)) == (S_ISVTX | S_IWOTH | S_IXOTH);
  return S_ISDIR(dir.st_mode) && (users_own || shared_sticky);
}

std::size_t remove_channel_files(const std::string& dir, std::string_view prefix, uid_t uid) {
  if (sys::file_type(dir) == sys::FileType::missing) return 0;
  const sys::Fd fd = sys::open_file(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  struct stat dir_st {};
  if (::fstat(fd.get(), &dir_st) != 0) {
    throw SystemError(fmt::format("couldn't stat {}: {}", dir, std::strerror(errno)));
  }
  std::size_t removed = 0;
  for (const std::string& name : sys::list_dir_fd(fd)) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    struct stat st {};
    if (::fstatat(fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone
    if (!removable_channel_file(dir_st, name, st, prefix, uid)) continue;
    sys::remove_file_at(fd, name);
    ++removed;
  }
  return removed;
}

}  // namespace dl
