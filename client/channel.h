// The page dlrun shares with the training program it runs (and the program's children):
// a 4 KiB file in /dev/shm named by DL_CLIENT_FILE, mapped by dlrun and by the client
// APIs (C++ dl/client.h, Python slurm_dl). Polling it costs a few memory loads, and it
// is reachable from any process that inherits the environment: forked or spawned
// multiprocessing workers, DataLoader workers, a shell script's children.
//
// Every field has one writer. dlrun writes the request fields, the program the report
// fields; 64-bit fields are naturally aligned so plain loads and stores are atomic
// (Python's ctypes uses the same offsets, see python/slurm_dl/_channel.py).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace dl::channel {

inline constexpr std::uint32_t kMagic = 0x31434c44;  // "DLC1" in file order
inline constexpr std::uint32_t kVersion = 1;
inline constexpr std::size_t kSize = 4096;
inline constexpr std::size_t kMetricsBytes = 1024;

struct Page {
  std::uint32_t magic;
  std::uint32_t version;
  std::uint32_t size;
  std::atomic<std::uint32_t> attached;  // the program's: 1 once a client API is loaded
  // Written by dlrun.
  std::atomic<std::int64_t> request_seq;  // +1 when a checkpoint round starts
  std::atomic<std::int64_t> target_seq;   // = request_seq once its step is agreed
  std::atomic<std::int64_t> target_step;  // the agreed step of target_seq
  std::atomic<std::int64_t> stopping;     // 1: dlrun ends the program after this checkpoint
  // Written by the program.
  std::atomic<std::int64_t> step;         // last report_step; -1 before the first
  std::atomic<std::int64_t> frozen_seq;   // the request it waits at `step` for
  std::atomic<std::int64_t> done_step;    // last checkpoint_done; -1 before the first
  std::atomic<std::int64_t> done_seq;     // the target_seq that checkpoint satisfied
  std::atomic<std::int64_t> metrics_seq;  // odd while the metrics are being written
  std::atomic<std::int64_t> metrics_step;
  char metrics[kMetricsBytes];  // "loss=0.31 acc=0.9", NUL-terminated
};

static_assert(std::atomic<std::int64_t>::is_always_lock_free,
              "the page is shared between processes: its atomics must be lock-free");
static_assert(offsetof(Page, attached) == 12 && offsetof(Page, request_seq) == 16 &&
                  offsetof(Page, target_seq) == 24 && offsetof(Page, target_step) == 32 &&
                  offsetof(Page, stopping) == 40 && offsetof(Page, step) == 48 &&
                  offsetof(Page, frozen_seq) == 56 && offsetof(Page, done_step) == 64 &&
                  offsetof(Page, done_seq) == 72 && offsetof(Page, metrics_seq) == 80 &&
                  offsetof(Page, metrics_step) == 88 && offsetof(Page, metrics) == 96,
              "the layout is shared with python/slurm_dl/_channel.py");
static_assert(sizeof(Page) <= kSize);

// A checkpoint was agreed and this rank's program has reached its step but not yet
// reported it done.
inline bool checkpoint_due(std::int64_t step, std::int64_t target_seq, std::int64_t target_step,
                           std::int64_t done_seq) {
  return target_seq > 0 && done_seq < target_seq && step >= target_step;
}

// A round has started whose step is not known yet: the program must not move on.
inline bool must_wait_for_target(std::int64_t request_seq, std::int64_t target_seq) {
  return request_seq > target_seq;
}

}  // namespace dl::channel
