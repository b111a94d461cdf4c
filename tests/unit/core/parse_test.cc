#include "core/parse.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace dl {
namespace {

using std::chrono::seconds;

std::string error_of(std::string_view text) {
  try {
    parse_uint("--dl-gpus", text, 1, 64);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ParseUint, AcceptsWholeNumbersInRange) {
  EXPECT_EQ(parse_uint("--x", "1", 1, 64), 1u);
  EXPECT_EQ(parse_uint("--x", "64", 1, 64), 64u);
  EXPECT_EQ(parse_uint("--x", "007", 1, 64), 7u);
  EXPECT_EQ(parse_uint("--x", "18446744073709551615", 0, UINT64_MAX), UINT64_MAX);
}

TEST(ParseUint, RejectsEverythingElseWithOneMessage) {
  for (const char* bad : {"", "abc", "-1", "+1", " 1", "1 ", "1.0", "0x10", "0", "65", "1e3",
                          "99999999999999999999999"}) {
    EXPECT_EQ(error_of(bad),
              std::string("--dl-gpus=") + bad + ": expected a whole number from 1 to 64")
        << bad;
  }
}

struct DurationCase {
  const char* text;
  long seconds;
};

class ParseDurationOk : public testing::TestWithParam<DurationCase> {};

TEST_P(ParseDurationOk, Parses) {
  EXPECT_EQ(parse_duration("--dl-grace", GetParam().text, seconds(0), seconds(86400 * 30)).count(),
            GetParam().seconds);
}

INSTANTIATE_TEST_SUITE_P(Table, ParseDurationOk,
                         testing::Values(DurationCase{"0", 0}, DurationCase{"90", 90},
                                         DurationCase{"90s", 90}, DurationCase{"30m", 1800},
                                         DurationCase{"2h", 7200}, DurationCase{"1d", 86400},
                                         DurationCase{"1h30m", 5400},
                                         DurationCase{"1d2h3m4s", 93784},
                                         DurationCase{"120s", 120}));

TEST(ParseDuration, RejectsMalformedAndOutOfRange) {
  for (const char* bad : {"", "s", "1x", "1hh", "30m1h", "1h30", "1h 30m", "-5s", "1.5h", "31d",
                          "999999999999999999999s", "9999999999999999d"}) {
    try {
      parse_duration("--dl-grace", bad, seconds(0), seconds(86400 * 30));
      ADD_FAILURE() << "accepted " << bad;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("--dl-grace=") + bad +
                    ": expected a duration such as 90s, 30m or 2h, from 0s to 30d");
    }
  }
}

TEST(ParseDuration, EnforcesMinimum) {
  EXPECT_THROW(parse_duration("--dl-ckpt-every", "0s", seconds(1), seconds(3600)), InputError);
  EXPECT_EQ(parse_duration("--dl-ckpt-every", "1s", seconds(1), seconds(3600)), seconds(1));
}

TEST(ParseOnOff, OnOrOffAndNothingElse) {
  EXPECT_TRUE(parse_on_off("--status-comment", "on"));
  EXPECT_FALSE(parse_on_off("--status-comment", "off"));
  for (const char* bad : {"", "no", "ON", "1", "off "}) {
    try {
      parse_on_off("--status-comment", bad);
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("--status-comment=") + bad + ": expected on or off");
    }
  }
}

TEST(FormatDuration, ShortestExactForm) {
  EXPECT_EQ(format_duration(seconds(0)), "0s");
  EXPECT_EQ(format_duration(seconds(-3)), "0s");
  EXPECT_EQ(format_duration(seconds(90)), "1m30s");
  EXPECT_EQ(format_duration(seconds(3600)), "1h");
  EXPECT_EQ(format_duration(seconds(5400)), "1h30m");
  EXPECT_EQ(format_duration(seconds(93784)), "1d2h3m4s");
}

TEST(FormatDuration, RoundTripsThroughParse) {
  for (long s : {1L, 59L, 60L, 61L, 3599L, 86399L, 86401L, 1234567L}) {
    EXPECT_EQ(parse_duration("--x", format_duration(seconds(s)), seconds(0), seconds(1 << 30)),
              seconds(s));
  }
}

}  // namespace
}  // namespace dl

TEST(PathComponents, SkipsEmptyComponents) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(dl::path_components("/a//b/"), (V{"a", "b"}));
  EXPECT_EQ(dl::path_components("rel/x"), (V{"rel", "x"}));
  EXPECT_EQ(dl::path_components("///"), V{});
  EXPECT_EQ(dl::path_components(""), V{});
}
