// A journal of one writer (exp/journal.h): a file of its own, created with
// O_EXCL|O_NOFOLLOW in the user's private experiment directory, appended to with
// O_APPEND, one write(2) per record so that threads never interleave.
#pragma once

#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "core/sysio.h"

namespace dl::exp {

// Makes <root>/<experiment>/journals a private directory of the calling user (created
// 0700, no symlink followed below the root; the root is created if missing) and returns it.
std::string ensure_journals_dir(const std::string& root, const std::string& experiment);

class JournalWriter {
 public:
  // A new journal <dir>/<stem>.<host>.<pid>.<nanoseconds>.jsonl; its name without
  // ".jsonl" is the writer's id in the database.
  JournalWriter(const std::string& dir, const std::string& stem);

  // Appends `record` with the next "seq" (from 1). With `sync`, fsyncs it; otherwise it
  // is fsynced with the next synced record, at most a second later, or on destruction.
  void append(nlohmann::json record, bool sync);

  const std::string& path() const { return fd_.path(); }
  ~JournalWriter();
  JournalWriter(const JournalWriter&) = delete;
  JournalWriter& operator=(const JournalWriter&) = delete;

 private:
  std::mutex mutex_;
  sys::Fd fd_;
  std::uint64_t seq_ = 0;
  std::int64_t last_sync_ns_ = 0;
  bool dirty_ = false;
};

// Seconds since the epoch, with fractions: the "time" of records.
double now_seconds();

}  // namespace dl::exp
