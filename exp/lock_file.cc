#include "exp/lock_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/sysio.h"

namespace dl::exp {

LockFile::LockFile(std::string path, const std::function<void(const std::string&)>& held)
    : path_(std::move(path)) {
  const std::string me = sys::hostname() + " " + std::to_string(::getpid());
  // Each pass either takes the lock, finds it released or taken over (and tries again)
  // or hands the holder to `held`; a lock that keeps changing hands is given up on.
  for (int pass = 0; pass < 1000; ++pass) {
    const int fd =
        ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      // Durable, so that after a crash of this host the holder can be seen to be gone.
      [[maybe_unused]] const ssize_t n = ::write(fd, me.data(), me.size());
      ::fsync(fd);
      ::close(fd);
      return;
    }
    if (errno != EEXIST) {
      throw SystemError("couldn't create " + path_ + ": " + std::strerror(errno));
    }
    std::string holder;
    try {
      holder = sys::read_file(path_, 4096);
    } catch (const std::exception&) {
      continue;  // released meanwhile
    }
    const auto space = holder.find(' ');
    if (space != std::string::npos && holder.substr(0, space) == sys::hostname()) {
      const long pid = std::strtol(holder.c_str() + space + 1, nullptr, 10);
      if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
        ::unlink(path_.c_str());  // its holder is gone (killed): take over
        continue;
      }
    }
    held(holder);
  }
  throw SystemError("couldn't take " + path_ + ": it keeps changing hands");
}

LockFile::~LockFile() { ::unlink(path_.c_str()); }

}  // namespace dl::exp
