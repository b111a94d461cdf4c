#include "ckpt/async.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>

namespace dl::ckpt {
namespace {

using namespace std::chrono_literals;

TEST(CkptAsync, IdleSlotAcquiresAtOnce) {
  SaveSlot slot;
  EXPECT_FALSE(slot.in_flight());
  EXPECT_LT(slot.acquire(), 50ms);
  EXPECT_TRUE(slot.in_flight());
  slot.release(nullptr);
  EXPECT_FALSE(slot.in_flight());
  EXPECT_NO_THROW(slot.wait());
}

TEST(CkptAsync, ASecondSaveWaitsForTheFirst) {
  SaveSlot slot;
  slot.acquire();
  std::atomic<bool> released{false};
  std::thread background([&] {
    std::this_thread::sleep_for(100ms);
    released = true;
    slot.release(nullptr);
  });
  const auto waited = slot.acquire();  // back-pressure
  EXPECT_TRUE(released);
  EXPECT_GE(waited, 50ms);
  slot.release(nullptr);
  background.join();
}

TEST(CkptAsync, AnErrorIsThrownOnceByTheNextCall) {
  SaveSlot slot;
  slot.acquire();
  std::thread([&] {
    slot.release(std::make_exception_ptr(std::runtime_error("disk full")));
  }).join();
  EXPECT_FALSE(slot.in_flight());
  try {
    slot.acquire();
    FAIL() << "expected the background error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "disk full");
  }
  EXPECT_FALSE(slot.in_flight());   // that save did not start
  EXPECT_NO_THROW(slot.acquire());  // the error was reported once
  slot.release(nullptr);
}

TEST(CkptAsync, WaitThrowsThePendingError) {
  SaveSlot slot;
  slot.acquire();
  std::thread background([&] {
    std::this_thread::sleep_for(20ms);
    slot.release(std::make_exception_ptr(std::runtime_error("EIO")));
  });
  EXPECT_THROW(slot.wait(), std::runtime_error);
  EXPECT_NO_THROW(slot.wait());
  background.join();
}

TEST(CkptAsync, DestructorsTakeTheErrorWithoutThrowing) {
  SaveSlot slot;
  slot.acquire();
  slot.release(std::make_exception_ptr(std::runtime_error("x")));
  EXPECT_TRUE(slot.wait_and_take_error());
  EXPECT_FALSE(slot.wait_and_take_error());
}

}  // namespace
}  // namespace dl::ckpt
