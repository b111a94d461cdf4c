#include "core/sysio.h"

#include <dirent.h>
#include <fmt/format.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

#include "core/error.h"

namespace dl::sys {
namespace {

[[noreturn]] void fail(std::string_view verb, std::string_view object, int err) {
  throw SystemError(fmt::format("couldn't {} {}: {}", verb, object, std::strerror(err)));
}

Calls make_default_calls() {
  Calls c;
  c.open = [](const char* path, int flags, mode_t mode) { return ::open(path, flags, mode); };
  c.close = [](int fd) { return ::close(fd); };
  c.pwrite = [](int fd, const void* buf, std::size_t n, off_t offset) {
    return ::pwrite(fd, buf, n, offset);
  };
  c.pread = [](int fd, void* buf, std::size_t n, off_t offset) {
    return ::pread(fd, buf, n, offset);
  };
  c.fsync = [](int fd) { return ::fsync(fd); };
  c.rename = [](const char* from, const char* to, unsigned flags) {
    return ::renameat2(AT_FDCWD, from, AT_FDCWD, to, flags);
  };
  c.mkdir = [](const char* path, mode_t mode) { return ::mkdir(path, mode); };
  c.unlink = [](const char* path) { return ::unlink(path); };
  c.rmdir = [](const char* path) { return ::rmdir(path); };
  return c;
}

// Large transfers go in pieces so that one call never exceeds what Linux moves at once
// (0x7ffff000 bytes) and a signal interrupts at most one piece.
constexpr std::size_t kMaxTransfer = std::size_t{1} << 30;

}  // namespace

Calls& calls() {
  static Calls c = make_default_calls();
  return c;
}

Fd::Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) calls().close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) calls().close(fd_);
}

void Fd::close() {
  const int fd = std::exchange(fd_, -1);
  // Linux releases the descriptor even when close fails, so it is never retried.
  if (fd >= 0 && calls().close(fd) != 0) fail("close", path_, errno);
}

Fd open_file(const std::string& path, int flags, mode_t mode) {
  while (true) {
    const int fd = calls().open(path.c_str(), flags | O_CLOEXEC, mode);
    if (fd >= 0) return Fd(fd, path);
    if (errno != EINTR) fail("open", path, errno);
  }
}

void write_all_at(const Fd& fd, const void* data, std::size_t n, std::uint64_t offset) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t done =
        calls().pwrite(fd.get(), p, std::min(n, kMaxTransfer), static_cast<off_t>(offset));
    if (done < 0) {
      if (errno == EINTR) continue;
      fail("write", fd.path(), errno);
    }
    if (done == 0) fail("write", fd.path(), ENOSPC);
    p += done;
    n -= static_cast<std::size_t>(done);
    offset += static_cast<std::uint64_t>(done);
  }
}

void read_exact_at(const Fd& fd, void* data, std::size_t n, std::uint64_t offset) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t done =
        calls().pread(fd.get(), p, std::min(n, kMaxTransfer), static_cast<off_t>(offset));
    if (done < 0) {
      if (errno == EINTR) continue;
      fail("read", fd.path(), errno);
    }
    if (done == 0) {
      throw SystemError(
          fmt::format("couldn't read {}: unexpected end of file at byte {}", fd.path(), offset));
    }
    p += done;
    n -= static_cast<std::size_t>(done);
    offset += static_cast<std::uint64_t>(done);
  }
}

void fsync_fd(const Fd& fd) {
  while (calls().fsync(fd.get()) != 0) {
    if (errno != EINTR) fail("fsync", fd.path(), errno);
  }
}

void fsync_dir(const std::string& dir) {
  Fd fd = open_file(dir, O_RDONLY | O_DIRECTORY);
  fsync_fd(fd);
  fd.close();
}

void rename_path(const std::string& from, const std::string& to, bool exchange) {
  if (calls().rename(from.c_str(), to.c_str(), exchange ? RENAME_EXCHANGE : 0) != 0) {
    fail(exchange ? "exchange" : "rename", fmt::format("{} and {}", from, to), errno);
  }
}

bool make_dir(const std::string& path, mode_t mode) {
  if (calls().mkdir(path.c_str(), mode) == 0) return true;
  if (errno == EEXIST && file_type(path) == FileType::directory) return false;
  fail("create directory", path, errno);
}

void make_dirs(const std::string& path) {
  if (file_type(path) == FileType::directory) return;
  const std::string parent = parent_dir(path);
  if (parent != path && parent != "." && parent != "/") make_dirs(parent);
  make_dir(path);
}

void remove_file(const std::string& path) {
  if (calls().unlink(path.c_str()) != 0 && errno != ENOENT) fail("remove", path, errno);
}

void remove_tree(const std::string& path) {
  if (file_type(path) == FileType::directory) {
    for (const std::string& name : list_dir(path)) remove_tree(join(path, name));
    if (calls().rmdir(path.c_str()) != 0 && errno != ENOENT) fail("remove directory", path, errno);
  } else {
    remove_file(path);
  }
}

void write_file_durably(const std::string& path, std::string_view content) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  try {
    Fd fd = open_file(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    write_all_at(fd, content.data(), content.size(), 0);
    fsync_fd(fd);
    fd.close();
    rename_path(tmp, path);
  } catch (...) {
    calls().unlink(tmp.c_str());
    throw;
  }
  fsync_dir(parent_dir(path));
}

std::string read_file(const std::string& path, std::size_t max_bytes) {
  Fd fd = open_file(path, O_RDONLY);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) fail("stat", path, errno);
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    throw SystemError(fmt::format("couldn't read {}: {} bytes is more than the {} allowed", path,
                                  st.st_size, max_bytes));
  }
  std::string out(static_cast<std::size_t>(st.st_size), '\0');
  read_exact_at(fd, out.data(), out.size(), 0);
  return out;
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), &::closedir);
  if (!d) fail("list directory", dir, errno);
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* e = ::readdir(d.get())) {
    const std::string_view name = e->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
    errno = 0;
  }
  if (errno != 0) fail("list directory", dir, errno);
  return names;
}

FileType file_type(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return FileType::missing;
    fail("stat", path, errno);
  }
  if (S_ISREG(st.st_mode)) return FileType::file;
  if (S_ISDIR(st.st_mode)) return FileType::directory;
  return FileType::other;
}

std::uint64_t file_size(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) fail("stat", path, errno);
  return static_cast<std::uint64_t>(st.st_size);
}

std::string join(std::string_view dir, std::string_view name) {
  if (dir.empty()) return std::string(name);
  if (dir.back() == '/') return fmt::format("{}{}", dir, name);
  return fmt::format("{}/{}", dir, name);
}

std::string parent_dir(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const std::size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return p.substr(0, slash);
}

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace dl::sys
