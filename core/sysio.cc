#include "core/sysio.h"

#include <dirent.h>
#include <fmt/format.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
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
  c.open = [](int dirfd, const char* path, int flags, mode_t mode) {
    return ::openat(dirfd, path, flags, mode);
  };
  c.close = [](int fd) { return ::close(fd); };
  c.pwrite = [](int fd, const void* buf, std::size_t n, off_t offset) {
    return ::pwrite(fd, buf, n, offset);
  };
  c.pread = [](int fd, void* buf, std::size_t n, off_t offset) {
    return ::pread(fd, buf, n, offset);
  };
  c.fsync = [](int fd) { return ::fsync(fd); };
  c.rename = [](int from_dir, const char* from, int to_dir, const char* to, unsigned flags) {
    return ::renameat2(from_dir, from, to_dir, to, flags);
  };
  c.mkdir = [](int dirfd, const char* path, mode_t mode) { return ::mkdirat(dirfd, path, mode); };
  c.unlink = [](int dirfd, const char* path, int flags) { return ::unlinkat(dirfd, path, flags); };
  return c;
}

// A name inside a directory must be one component: no '/', not "." or "..".
void check_name(const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    throw SystemError(fmt::format("couldn't use {:?}: not a file name", name));
  }
}

Fd open_checked(int dirfd, const std::string& name, int flags, mode_t mode,
                const std::string& display) {
  while (true) {
    const int fd = calls().open(dirfd, name.c_str(), flags | O_CLOEXEC, mode);
    if (fd >= 0) return Fd(fd, display);
    if (errno == ELOOP && (flags & O_NOFOLLOW)) {
      throw SystemError(fmt::format("couldn't open {}: a symbolic link (refused)", display));
    }
    if (errno != EINTR) fail("open", display, errno);
  }
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
    reset(std::exchange(other.fd_, -1));
    path_ = std::move(other.path_);
  }
  return *this;
}

Fd::~Fd() { reset(); }

void Fd::reset(int fd) noexcept {
  if (fd_ >= 0) calls().close(fd_);
  fd_ = fd;
  path_.clear();
}

void Fd::close() {
  const int fd = std::exchange(fd_, -1);
  // Linux releases the descriptor even when close fails, so it is never retried.
  if (fd >= 0 && calls().close(fd) != 0) fail("close", path_, errno);
}

Fd open_file(const std::string& path, int flags, mode_t mode) {
  return open_checked(AT_FDCWD, path, flags, mode, path);
}

Fd open_at(const Fd& dir, const std::string& name, int flags, mode_t mode) {
  check_name(name);
  return open_checked(dir.get(), name, flags | O_NOFOLLOW, mode, join(dir.path(), name));
}

Fd open_dir(const std::string& path) {
  return open_checked(AT_FDCWD, path, O_RDONLY | O_DIRECTORY, 0, path);
}

Fd open_dir_at(const Fd& dir, const std::string& name) {
  return open_at(dir, name, O_RDONLY | O_DIRECTORY);
}

std::string random_hex() {
  std::uint64_t r = 0;
  for (std::size_t got = 0; got < sizeof r;) {
    const ssize_t n = ::getrandom(reinterpret_cast<char*>(&r) + got, sizeof r - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("get", "random bytes", errno);
    }
    got += static_cast<std::size_t>(n);
  }
  return fmt::format("{:016x}", r);
}

Fd create_unique_at(const Fd& dir, const std::string& prefix, int flags, mode_t mode) {
  check_name(prefix + "x");
  for (int attempt = 0;; ++attempt) {
    const std::string name = prefix + random_hex();
    const int fd = calls().open(dir.get(), name.c_str(),
                                flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd >= 0) return Fd(fd, join(dir.path(), name));
    // EEXIST on 64 random bits is someone planting names: try others, a few times.
    if (errno == EINTR || (errno == EEXIST && attempt < 8)) continue;
    fail("create", join(dir.path(), name), errno);
  }
}

std::string read_fd(const Fd& fd, std::size_t max_bytes) {
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) fail("stat", fd.path(), errno);
  if (!S_ISREG(st.st_mode)) {
    throw SystemError(fmt::format("couldn't read {}: not a regular file", fd.path()));
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    throw SystemError(fmt::format("couldn't read {}: {} bytes is more than the {} allowed",
                                  fd.path(), st.st_size, max_bytes));
  }
  std::string out(static_cast<std::size_t>(st.st_size), '\0');
  read_exact_at(fd, out.data(), out.size(), 0);
  return out;
}

std::string read_file_at(const Fd& dir, const std::string& name, std::size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  return read_fd(open_at(dir, name, O_RDONLY | O_NONBLOCK), max_bytes);
}

bool read_available(int fd, std::string& out) {
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out.assign(buf, static_cast<std::size_t>(n));
      return true;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    if (errno == EAGAIN) {
      out.clear();
      return true;
    }
    return false;
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
  if (calls().rename(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(),
                     exchange ? RENAME_EXCHANGE : 0) != 0) {
    fail(exchange ? "exchange" : "rename", fmt::format("{} and {}", from, to), errno);
  }
}

void rename_at(const Fd& from_dir, const std::string& from, const Fd& to_dir, const std::string& to,
               bool exchange) {
  check_name(from);
  check_name(to);
  if (calls().rename(from_dir.get(), from.c_str(), to_dir.get(), to.c_str(),
                     exchange ? RENAME_EXCHANGE : 0) != 0) {
    fail(exchange ? "exchange" : "rename",
         fmt::format("{} and {}", join(from_dir.path(), from), join(to_dir.path(), to)), errno);
  }
}

bool make_dir(const std::string& path, mode_t mode) {
  if (calls().mkdir(AT_FDCWD, path.c_str(), mode) == 0) return true;
  if (errno == EEXIST && file_type(path) == FileType::directory) return false;
  fail("create directory", path, errno);
}

bool make_dir_at(const Fd& dir, const std::string& name, mode_t mode) {
  check_name(name);
  if (calls().mkdir(dir.get(), name.c_str(), mode) == 0) return true;
  if (errno == EEXIST) return false;
  fail("create directory", join(dir.path(), name), errno);
}

void make_dirs(const std::string& path) {
  if (file_type(path) == FileType::directory) return;
  const std::string parent = parent_dir(path);
  if (parent != path && parent != "." && parent != "/") make_dirs(parent);
  make_dir(path);
}

void remove_file(const std::string& path) {
  if (calls().unlink(AT_FDCWD, path.c_str(), 0) != 0 && errno != ENOENT) {
    fail("remove", path, errno);
  }
}

void remove_file_at(const Fd& dir, const std::string& name) {
  check_name(name);
  if (calls().unlink(dir.get(), name.c_str(), 0) != 0 && errno != ENOENT) {
    fail("remove", join(dir.path(), name), errno);
  }
}

void remove_tree_at(const Fd& dir, const std::string& name) {
  check_name(name);
  const std::string display = join(dir.path(), name);
  // Anything but a directory (a file, a link, a FIFO) goes with one unlinkat, which never
  // follows a link; only a real directory is entered, through a descriptor opened with
  // O_NOFOLLOW, so a directory swapped for a link in between is never entered.
  if (calls().unlink(dir.get(), name.c_str(), 0) == 0 || errno == ENOENT) return;
  if (errno != EISDIR && errno != EPERM) fail("remove", display, errno);
  {
    int raw;
    do {
      raw =
          calls().open(dir.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
    } while (raw < 0 && errno == EINTR);
    if (raw < 0 && errno == ENOENT) return;
    if (raw < 0) fail("open", display, errno);
    const Fd sub(raw, display);
    for (const std::string& entry : list_dir_fd(sub)) remove_tree_at(sub, entry);
  }
  if (calls().unlink(dir.get(), name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    fail("remove directory", display, errno);
  }
}

void remove_tree(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  if (file_type(p) == FileType::missing) return;
  const Fd parent = open_dir(parent_dir(p));
  remove_tree_at(parent, base_name(p));
}

void write_file_durably_at(const Fd& dir, const std::string& name, std::string_view content) {
  check_name(name);
  Fd fd = create_unique_at(dir, name + ".tmp.", O_WRONLY, 0666);
  const std::string tmp = base_name(fd.path());
  try {
    write_all_at(fd, content.data(), content.size(), 0);
    fsync_fd(fd);
    fd.close();
    rename_at(dir, tmp, dir, name);
  } catch (...) {
    calls().unlink(dir.get(), tmp.c_str(), 0);
    throw;
  }
  fsync_fd(dir);
}

void write_file_durably(const std::string& path, std::string_view content) {
  const Fd dir = open_dir(parent_dir(path));
  write_file_durably_at(dir, base_name(path), content);
}

std::string read_file(const std::string& path, std::size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  return read_fd(open_file(path, O_RDONLY | O_NONBLOCK), max_bytes);
}

std::vector<std::string> list_dir(const std::string& dir) {
  int fd;
  do {
    fd = calls().open(AT_FDCWD, dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) fail("list directory", dir, errno);
  return list_dir_fd(Fd(fd, dir));
}

std::vector<std::string> list_dir_fd(const Fd& fd) {
  const std::string& dir = fd.path();
  // fdopendir takes over the descriptor it is given: hand it a duplicate.
  const int own = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, 0);
  if (own < 0) fail("list directory", dir, errno);
  std::unique_ptr<DIR, int (*)(DIR*)> d(::fdopendir(own), &::closedir);
  if (!d) {
    const int err = errno;
    ::close(own);
    fail("list directory", dir, err);
  }
  ::rewinddir(d.get());
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

FileType file_type_at(const Fd& dir, const std::string& name) {
  check_name(name);
  struct stat st;
  if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return FileType::missing;
    fail("stat", join(dir.path(), name), errno);
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

std::string base_name(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const std::size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::optional<std::string> getenv_opt(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (!v) return std::nullopt;
  return std::string(v);
}

}  // namespace dl::sys
