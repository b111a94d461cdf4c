#include "core/log.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dl {
namespace {

TEST(Log, GoesThroughTheInstalledSink) {
  std::vector<std::pair<LogLevel, std::string>> seen;
  set_log_sink([&](LogLevel level, std::string_view msg) { seen.emplace_back(level, msg); });
  log(LogLevel::warning, "checkpoint {} is {}", 1200, "corrupt");
  log(LogLevel::debug, "quiet");
  set_log_sink({});
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].first, LogLevel::warning);
  EXPECT_EQ(seen[0].second, "checkpoint 1200 is corrupt");
  EXPECT_EQ(seen[1].first, LogLevel::debug);
}

TEST(Log, DefaultSinkWritesInfoAndAboveToStderr) {
  testing::internal::CaptureStderr();
  log(LogLevel::info, "hello {}", 1);
  log(LogLevel::debug, "hidden");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "dl: info: hello 1\n");
}

}  // namespace
}  // namespace dl
