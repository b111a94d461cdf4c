#include "launcher/channel_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.h"
#include "core/sysio.h"

namespace dl {
namespace {

std::string directory() {
  if (access("/dev/shm", W_OK) == 0) return "/dev/shm";
  const char* tmp = std::getenv("TMPDIR");
  return tmp && *tmp ? tmp : "/tmp";
}

}  // namespace

ChannelFile ChannelFile::create(const std::string& stem) {
  const sys::Fd fd = sys::create_unique_at(sys::open_dir(directory()), stem, O_RDWR, 0600);
  const std::string path = fd.path();
  const auto fail = [&](const char* what) {
    return SystemError(fmt::format("couldn't {} {}: {}", what, path, std::strerror(errno)));
  };
  if (ftruncate(fd.get(), channel::kSize) != 0) {
    const SystemError e = fail("size");
    unlink(path.c_str());
    throw e;
  }
  void* p = mmap(nullptr, channel::kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) {
    const SystemError e = fail("map");
    unlink(path.c_str());
    throw e;
  }
  auto* page = new (p) channel::Page{};
  page->magic = channel::kMagic;
  page->version = channel::kVersion;
  page->size = channel::kSize;
  page->step.store(-1);
  page->done_step.store(-1);
  page->metrics_step.store(-1);
  return ChannelFile(path, page);
}

ChannelFile::ChannelFile(ChannelFile&& other) noexcept
    : path_(std::move(other.path_)), page_(std::exchange(other.page_, nullptr)) {}

ChannelFile::~ChannelFile() {
  if (!page_) return;
  munmap(page_, channel::kSize);
  unlink(path_.c_str());
}

std::optional<ChannelFile::Metrics> ChannelFile::read_metrics() const {
  const std::int64_t before = page_->metrics_seq.load(std::memory_order_acquire);
  if (before % 2 != 0) return std::nullopt;
  Metrics m;
  m.step = page_->metrics_step.load(std::memory_order_relaxed);
  char buf[channel::kMetricsBytes];
  std::memcpy(buf, page_->metrics, sizeof buf);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (page_->metrics_seq.load(std::memory_order_relaxed) != before) return std::nullopt;
  buf[sizeof buf - 1] = '\0';
  m.text = buf;
  return m;
}

}  // namespace dl
