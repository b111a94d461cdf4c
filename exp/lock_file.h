// A lock held by a file: created with O_EXCL (which NFS honours, where fcntl locks are
// unreliable), holding "host pid", removed when released. A lock left by a dead process
// of this host is taken over; one held by a live process, or by any process of another
// host, is the caller's to wait for or to report.
#pragma once

#include <functional>
#include <string>

namespace dl::exp {

class LockFile {
 public:
  // Takes the lock at `path`. While another process holds it, calls `held(holder)` with
  // the holder's "host pid": it returns to try again (after a pause of its own choice)
  // or throws to give up.
  LockFile(std::string path, const std::function<void(const std::string& holder)>& held);
  ~LockFile();
  LockFile(const LockFile&) = delete;
  LockFile& operator=(const LockFile&) = delete;

 private:
  std::string path_;
};

}  // namespace dl::exp
