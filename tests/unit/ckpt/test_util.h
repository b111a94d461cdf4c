// Shared by the checkpoint library's tests: a scratch directory, a log capture and
// file surgery (flip a byte, truncate).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "core/log.h"
#include "core/sysio.h"

namespace dl::ckpt::test {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/dl-ckpt-test-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) std::abort();
    path_ = tmpl;
  }
  ~TempDir() { sys::remove_tree(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return sys::join(path_, name); }

 private:
  std::string path_;
};

// Collects what the library logs while it lives.
class LogCapture {
 public:
  LogCapture() {
    set_log_sink([this](LogLevel level, std::string_view msg) {
      seen.emplace_back(level, std::string(msg));
    });
  }
  ~LogCapture() { set_log_sink({}); }
  std::vector<std::string> at(LogLevel level) const {
    std::vector<std::string> out;
    for (const auto& [l, m] : seen) {
      if (l == level) out.push_back(m);
    }
    return out;
  }
  std::vector<std::pair<LogLevel, std::string>> seen;
};

inline std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names = sys::list_dir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

inline void flip_byte(const std::string& path, std::uint64_t offset) {
  sys::Fd fd = sys::open_file(path, O_RDWR);
  unsigned char b;
  sys::read_exact_at(fd, &b, 1, offset);
  b ^= 0xff;
  sys::write_all_at(fd, &b, 1, offset);
  fd.close();
}

inline void truncate_file(const std::string& path, std::uint64_t size) {
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(size)), 0);
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  sys::Fd fd = sys::open_file(path, O_WRONLY | O_CREAT | O_TRUNC);
  sys::write_all_at(fd, bytes.data(), bytes.size(), 0);
  fd.close();
}

}  // namespace dl::ckpt::test
