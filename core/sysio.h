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
#include <utility>
#include <vector>

namespace dl::sys {

// The seam: production code calls these, never the libc functions directly. Tests
// replace entries (see ScopedCalls) and restore them.
struct Calls {
  // The *at forms, so that names inside a directory held open are resolved against it
  // (AT_FDCWD for plain paths).
  std::function<int(int dirfd, const char* path, int flags, mode_t mode)> open;  // openat
  std::function<int(int fd)> close;
  std::function<ssize_t(int fd, const void* buf, std::size_t n, off_t offset)> pwrite;
  std::function<ssize_t(int fd, void* buf, std::size_t n, off_t offset)> pread;
  std::function<int(int fd)> fsync;
  std::function<int(int from_dir, const char* from, int to_dir, const char* to, unsigned flags)>
      rename;                                                          // renameat2
  std::function<int(int dirfd, const char* path, mode_t mode)> mkdir;  // mkdirat
  std::function<int(int dirfd, const char* path, int flags)> unlink;   // unlinkat
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

// The owner of a file descriptor (move-only), closed on destruction (errors ignored
// there: call close() to see them, which matters on filesystems that report write errors
// at close). `path` names it in messages.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  Fd(Fd&& other) noexcept;
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }
  void close();
  // Gives the descriptor up without closing it.
  int release() { return std::exchange(fd_, -1); }
  // Closes the descriptor it holds (errors ignored) and takes `fd`, with no path.
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
  std::string path_;
};

// open(2), retried on EINTR.
Fd open_file(const std::string& path, int flags, mode_t mode = 0666);

// openat(2) of `name` inside the directory `dir`, retried on EINTR, never following a
// symbolic link at `name` (O_NOFOLLOW is added). The Fd's path is "dir/name".
Fd open_at(const Fd& dir, const std::string& name, int flags, mode_t mode = 0666);

// A directory to resolve names against: `path` as given (links in it are followed), or
// `name` inside `dir` (a link there is refused).
Fd open_dir(const std::string& path);
Fd open_dir_at(const Fd& dir, const std::string& name);

// Creates a new file `<prefix><16 random hex digits>` in `dir` with O_CREAT | O_EXCL |
// O_NOFOLLOW, so that nothing planted at a name can be opened in its place: returns the
// open file (its path() ends with the name chosen).
Fd create_unique_at(const Fd& dir, const std::string& prefix, int flags, mode_t mode = 0666);

// 16 hex digits from getrandom(2): names nobody can plant in advance.
std::string random_hex();

// A regular file's whole content, opened without blocking (a FIFO or a device is refused,
// not waited on) and refused if it is larger than `max_bytes`. Throws SystemError.
std::string read_fd(const Fd& fd, std::size_t max_bytes);

// The file `name` in `dir` (a symbolic link there is refused), as read_fd.
std::string read_file_at(const Fd& dir, const std::string& name, std::size_t max_bytes);

// Reads what a pipe or socket has now into `out` (empty: nothing yet, EAGAIN); false at
// end of file or on an error.
bool read_available(int fd, std::string& out);

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

// mkdirat(2) of `name` in `dir`; false (nothing created) if the name exists.
bool make_dir_at(const Fd& dir, const std::string& name, mode_t mode = 0777);

// Creates `path` and its missing parents.
void make_dirs(const std::string& path);

void remove_file(const std::string& path);
void remove_file_at(const Fd& dir, const std::string& name);  // missing is fine

// Removes a directory tree without following a symbolic link anywhere: every name is
// removed relative to its own directory's descriptor, so a directory swapped for a link
// mid-way is unlinked as a link, never entered. A link at `path` itself is removed as a
// link. Missing is fine.
void remove_tree(const std::string& path);
void remove_tree_at(const Fd& dir, const std::string& name);

// renameat2(2) of names in two directories held open.
void rename_at(const Fd& from_dir, const std::string& from, const Fd& to_dir, const std::string& to,
               bool exchange = false);

// Replaces `path` with `content` durably: a new temporary file with an unpredictable name
// in the same directory (O_CREAT | O_EXCL | O_NOFOLLOW), fsync, rename over `path`, fsync
// of the directory. Readers see the old or the new content, never a mix, even after a
// crash; a link or FIFO planted at any of the names is never written through.
void write_file_durably(const std::string& path, std::string_view content);
void write_file_durably_at(const Fd& dir, const std::string& name, std::string_view content);

// The whole file, refused if it is not a regular file or larger than `max_bytes` (a FIFO
// or a link to a device fails at once instead of blocking or filling memory).
std::string read_file(const std::string& path, std::size_t max_bytes);

// Names in a directory (no "." and ".."), unsorted.
std::vector<std::string> list_dir(const std::string& dir);
std::vector<std::string> list_dir_fd(const Fd& dir);

enum class FileType { missing, file, directory, other };
FileType file_type(const std::string& path);
// The same for `name` in `dir` (a link is `other`).
FileType file_type_at(const Fd& dir, const std::string& name);
std::uint64_t file_size(const std::string& path);

// "dir/name", without doubling a trailing '/'.
std::string join(std::string_view dir, std::string_view name);

// The directory part of a path ("." for a bare name).
std::string parent_dir(const std::string& path);

// The last component of a path ("a/b/" gives "b").
std::string base_name(const std::string& path);

std::string hostname();

// The environment variable `name`, if it is set.
std::optional<std::string> getenv_opt(const std::string& name);

}  // namespace dl::sys
