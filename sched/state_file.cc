#include "sched/state_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/sysio.h"

namespace dl::sched {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw SystemError(what + " " + path + ": " + std::strerror(errno));
}

std::string dir_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

void save_durably(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".new";
  {
    sys::Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!fd) fail("couldn't create", tmp);
    for (std::size_t done = 0; done < text.size();) {
      const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail("couldn't write", tmp);
      done += static_cast<std::size_t>(n);
    }
    if (::fsync(fd.get()) != 0) fail("couldn't fsync", tmp);
  }
  if (::rename(path.c_str(), (path + ".old").c_str()) != 0 && errno != ENOENT) {
    fail("couldn't keep the previous copy of", path);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("couldn't rename to", path);
  const std::string dir = dir_of(path);
  sys::Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!d || ::fsync(d.get()) != 0) fail("couldn't fsync the directory", dir);
}

std::optional<std::string> read_file(const std::string& path) {
  sys::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return std::nullopt;
    fail("couldn't open", path);
  }
  std::string text;
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("couldn't read", path);
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  return text;
}

std::optional<LoadedState> load_newest_good(
    const std::string& path, const std::function<void(const std::string&)>& check,
    const std::function<void(const std::string&, const std::string&)>& complain) {
  for (const auto& copy : {path, path + ".old"}) {
    try {
      auto text = read_file(copy);
      if (!text) continue;
      check(*text);
      return LoadedState{copy, std::move(*text)};
    } catch (const std::exception& e) {
      complain(copy, e.what());
    }
  }
  return std::nullopt;
}

}  // namespace dl::sched
