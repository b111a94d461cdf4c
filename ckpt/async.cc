#include "ckpt/async.h"

#include <utility>

namespace dl::ckpt {

std::chrono::nanoseconds SaveSlot::acquire() {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return !in_flight_; });
  const auto waited = std::chrono::steady_clock::now() - start;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  in_flight_ = true;
  return std::chrono::duration_cast<std::chrono::nanoseconds>(waited);
}

void SaveSlot::release(std::exception_ptr error) noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    in_flight_ = false;
    error_ = std::move(error);
  }
  idle_.notify_all();
}

void SaveSlot::wait() {
  if (std::exception_ptr e = wait_and_take_error()) std::rethrow_exception(e);
}

bool SaveSlot::in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_flight_;
}

std::exception_ptr SaveSlot::wait_and_take_error() noexcept {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return !in_flight_; });
  return std::exchange(error_, nullptr);
}

}  // namespace dl::ckpt
