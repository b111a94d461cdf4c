#include "launcher/restart_state.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/unique_fd.h"

namespace dl {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw SystemError(fmt::format("couldn't {} {}: {}", what, path, std::strerror(errno)));
}

std::string parent_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

}  // namespace

std::string history_path(const std::string& ckpt_dir, const std::string& job_id) {
  return fmt::format("{}/.dlrun-{}.restarts", ckpt_dir, job_id);
}

RestartHistory read_history(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return {};
    fail("read", path);
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    return decode_history(text.str());
  } catch (const InputError& e) {
    throw SystemError(fmt::format("{}: {}", path, e.what()));
  }
}

void write_history(const std::string& path, const RestartHistory& history) {
  const std::string tmp = path + ".tmp";
  const std::string text = encode_history(history);
  {
    UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) fail("create", tmp);
    if (write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      fail("write", tmp);
    }
    if (fsync(fd.get()) != 0) fail("fsync", tmp);
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) fail("rename into place", path);
  const std::string dir = parent_of(path);
  UniqueFd dfd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dfd || fsync(dfd.get()) != 0) fail("fsync", dir);
}

void remove_history(const std::string& path) {
  if (unlink(path.c_str()) != 0 && errno != ENOENT) fail("remove", path);
}

}  // namespace dl
