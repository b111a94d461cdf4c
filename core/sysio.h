// The system calls of durable file handling, behind a seam so that tests can inject
// EINTR, short writes and ENOSPC (as fmt's test/posix-mock.h does), and the checked
// helpers built on them. Every failure throws dl::SystemError naming the call's object
// and strerror, e.g. "couldn't write /ckpt/step-000000100/shard-00000-of-00001.h5: No
// space left on device".
#pragma once

#include <fcntl.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dl::sys {

// The seam: production code calls these, never the libc functions directly. Tests
// replace entries (see ScopedCalls) and restore them.
struct Calls {
  std::function<int(const char* path, int flags, mode_t mode)> open;
  std::function<int(int fd)> close;
  std::function<ssize_t(int fd, const void* buf, std::size_t n, off_t offset)> pwrite;
  std::function<ssize_t(int fd, void* buf, std::size_t n, off_t offset)> pread;
  std::function<int(int fd)> fsync;
  std::function<int(const char* from, const char* to, unsigned flags)> rename;  // renameat2
  std::function<int(const char* path, mode_t mode)> mkdir;
  std::function<int(const char* path)> unlink;
  std::function<int(const char* path)> rmdir;
};

Calls& calls();

// Restores the calls in use at construction when it goes out of scope.
class ScopedCalls {
 public:
  ScopedCalls() : saved_(calls()) {}
  ~ScopedCalls() { calls() = saved_; }
  ScopedCalls(const ScopedCalls&) = delete;
  ScopedCalls& operator=(const ScopedCalls&) = delete;

 private:
  Calls saved_;
};

// A file descriptor, closed on destruction (errors ignored there: call close() to see
// them, which matters on filesystems that report write errors at close).
class Fd {
 public:
  Fd() = default;
  Fd(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  Fd(Fd&& other) noexcept;
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();

  int get() const { return fd_; }
  const std::string& path() const { return path_; }
  void close();

 private:
  int fd_ = -1;
  std::string path_;
};

// open(2), retried on EINTR.
Fd open_file(const std::string& path, int flags, mode_t mode = 0666);

// Writes all `n` bytes at `offset`: retries EINTR, continues after short writes.
void write_all_at(const Fd& fd, const void* data, std::size_t n, std::uint64_t offset);

// Reads exactly `n` bytes at `offset`; an early end of file is an error.
void read_exact_at(const Fd& fd, void* data, std::size_t n, std::uint64_t offset);

void fsync_fd(const Fd& fd);
void fsync_dir(const std::string& dir);

// rename(2); with `exchange`, swaps the two names atomically (both must exist).
void rename_path(const std::string& from, const std::string& to, bool exchange = false);

// mkdir(2); returns false if the directory already exists.
bool make_dir(const std::string& path, mode_t mode = 0777);

// Creates `path` and its missing parents.
void make_dirs(const std::string& path);

void remove_file(const std::string& path);

// Removes a directory tree (no symbolic links are followed).
void remove_tree(const std::string& path);

// Replaces `path` with `content` durably: a temporary file in the same directory,
// fsync, rename over `path`, fsync of the directory. Readers see the old or the new
// content, never a mix, even after a crash.
void write_file_durably(const std::string& path, std::string_view content);

// The whole file, refused if it is larger than `max_bytes`.
std::string read_file(const std::string& path, std::size_t max_bytes);

// Names in a directory (no "." and ".."), unsorted.
std::vector<std::string> list_dir(const std::string& dir);

enum class FileType { missing, file, directory, other };
FileType file_type(const std::string& path);
std::uint64_t file_size(const std::string& path);

// "dir/name", without doubling a trailing '/'.
std::string join(std::string_view dir, std::string_view name);

// The directory part of a path ("." for a bare name).
std::string parent_dir(const std::string& path);

std::string hostname();

}  // namespace dl::sys
