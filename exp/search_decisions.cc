#include "exp/search_decisions.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "client/decision_file.h"
#include "core/error.h"
#include "core/sysio.h"

namespace dl::exp::search {

using namespace dl::sys;  // files: join, open_file, file_type, ...

std::string decision_path(const std::string& dir, const std::string& trial, const std::string& job,
                          int rung) {
  return join(dir, decision::file_name(trial, job, rung));
}

bool waits_for_decision(const std::string& path) {
  return file_type(path + std::string(decision::kWaitSuffix)) == FileType::file &&
         file_type(path) != FileType::file;
}

std::string decide(const std::string& path, const std::string& text) {
  const std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), random_hex());
  {
    Fd fd = open_file(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    write_all_at(fd, text.data(), text.size(), 0);
    fsync_fd(fd);
  }
  const int rc = ::link(tmp.c_str(), path.c_str());
  const int err = errno;
  ::unlink(tmp.c_str());
  if (rc != 0 && err != EEXIST) {
    throw SystemError(fmt::format("couldn't create {}: {}", path, std::strerror(err)));
  }
  fsync_dir(parent_dir(path));
  return read_file(path, 4096);
}

}  // namespace dl::exp::search
