#include "exp/writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "client/journal.h"
#include "core/error.h"
#include "core/private_dir.h"

namespace dl::exp {

using namespace dl::sys;  // files: join, open_file, list_dir, ...
namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

double now_seconds() { return static_cast<double>(now_ns()) / 1e9; }

std::string ensure_journals_dir(const std::string& root, const std::string& experiment) {
  make_dirs(root);
  const std::string dir = join(join(root, experiment), "journals");
  ensure_private_dir(dir, {root});
  return dir;
}

JournalWriter::JournalWriter(const std::string& dir, const std::string& stem) {
  const std::string name =
      stem + "." + hostname() + "." + std::to_string(::getpid()) + "." + std::to_string(now_ns());
  fd_ = open_file(join(dir, name + ".jsonl"),
                  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC, 0600);
  fsync_dir(dir);
}

void JournalWriter::append(nlohmann::json record, bool sync) {
  std::lock_guard<std::mutex> lock(mutex_);
  record["seq"] = seq_ + 1;
  const std::string line = journal::frame(record.dump());
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_.get(), line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw SystemError("couldn't append to " + fd_.path() + ": " + std::strerror(errno));
    }
    done += static_cast<std::size_t>(n);
  }
  ++seq_;
  dirty_ = true;
  const std::int64_t now = now_ns();
  if (sync || now - last_sync_ns_ > 1'000'000'000) {
    fsync_fd(fd_);
    dirty_ = false;
    last_sync_ns_ = now;
  }
}

JournalWriter::~JournalWriter() {
  if (dirty_ && fd_.get() >= 0) ::fsync(fd_.get());
}

}  // namespace dl::exp
