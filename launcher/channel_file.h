// dlrun's side of the page it shares with the program (client/channel.h): created
// before the program starts, removed when dlrun exits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "client/channel.h"

namespace dl {

class ChannelFile {
 public:
  // A new file `<stem><16 random hex digits>` in /dev/shm (or $TMPDIR, or /tmp, when
  // /dev/shm is not writable), mode 0600, initialized. A name that exists is someone
  // else's: another is drawn (sys::create_unique_at). Throws dl::SystemError naming
  // the path.
  static ChannelFile create(const std::string& stem);
  ~ChannelFile();
  ChannelFile(ChannelFile&& other) noexcept;
  ChannelFile& operator=(ChannelFile&&) = delete;
  ChannelFile(const ChannelFile&) = delete;
  ChannelFile& operator=(const ChannelFile&) = delete;

  const std::string& path() const { return path_; }
  channel::Page& page() const { return *page_; }

  // The program's last metrics and their step, read consistently without a lock
  // (seqlock); nullopt while a writer is in the middle of an update.
  struct Metrics {
    std::int64_t step = -1;
    std::string text;
  };
  std::optional<Metrics> read_metrics() const;

 private:
  ChannelFile(std::string path, channel::Page* page) : path_(std::move(path)), page_(page) {}
  std::string path_;
  channel::Page* page_ = nullptr;
};

}  // namespace dl
