// The back-pressure state machine of asynchronous saves: at most one save is in flight;
// the next one waits for it; an error of a background save is rethrown exactly once, by
// the next call into the checkpointer (it is logged when it happens, too).
//
//   idle --acquire--> in flight --release(ok)--> idle
//                              \--release(error)--> failed --acquire/wait: throw--> idle
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>

namespace dl::ckpt {

class SaveSlot {
 public:
  // Before a new save (training thread): waits while one is in flight, then either
  // throws the error it ended with (and the slot becomes idle again) or marks the slot
  // in flight. Returns how long it waited.
  std::chrono::nanoseconds acquire();

  // The save started by the last acquire() ended (background thread, or the caller if
  // it failed before handing over). `error` is null on success.
  void release(std::exception_ptr error) noexcept;

  // Waits until no save is in flight; throws a pending error once.
  void wait();

  bool in_flight() const;

  // Waits like wait() but returns a pending error instead of throwing it (destructors).
  std::exception_ptr wait_and_take_error() noexcept;

 private:
  mutable std::mutex mutex_;
  std::condition_variable idle_;
  bool in_flight_ = false;
  std::exception_ptr error_;
};

}  // namespace dl::ckpt
