#include "exp/tensorboard.h"

#include <gtest/gtest.h>

namespace dl::exp::tensorboard {
namespace {

TEST(TensorBoard, Crc32cCheckValue) { EXPECT_EQ(crc32c("123456789"), 0xE3069283u); }

TEST(TensorBoard, RecordFraming) {
  const std::string r = record("abc");
  ASSERT_EQ(r.size(), 8u + 4u + 3u + 4u);
  EXPECT_EQ(r.substr(0, 8), std::string("\x03\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(r.substr(12, 3), "abc");
}

TEST(TensorBoard, ScalarsEventEncodesStepAndTags) {
  const std::string e = scalars_event(1.5, 300, {{"loss", 0.25}});
  // wall_time (field 1, fixed64), step (field 2, varint 300 = ac 02), summary (field 5).
  EXPECT_EQ(e.substr(0, 1), "\x09");
  EXPECT_EQ(e.substr(9, 3), "\x10\xac\x02");
  EXPECT_NE(e.find("loss"), std::string::npos);
}

}  // namespace
}  // namespace dl::exp::tensorboard
