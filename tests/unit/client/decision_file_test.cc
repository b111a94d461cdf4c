#include "client/decision_file.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace dl::decision {
namespace {

std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out(1);
  for (const char c : line) {
    if (c == '\t') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

std::string unescape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == 'n') {
      out += '\n';
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The cases the Python client is checked against too (python/tests/test_client.py).
TEST(DecisionFile, AgreesWithTheSharedCases) {
  const char* top = std::getenv("top_srcdir");
  const std::string path =
      std::string(top ? top : "../..") + "/tests/unit/client/decision_cases.txt";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  int cases = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto f = fields(line);
    SCOPED_TRACE(line);
    if (f[0] == "parse") {
      ASSERT_EQ(f.size(), 3u);
      const auto got = parse(unescape(f[1]));
      const std::string said =
          got ? "continue " + std::to_string(got->rung) + " " + std::to_string(got->budget) : "end";
      EXPECT_EQ(said, f[2]);
    } else {
      ASSERT_EQ(f[0], "name");
      ASSERT_EQ(f.size(), 5u);
      EXPECT_EQ(file_name(f[1], f[2], std::stoll(f[3])), f[4]);
    }
    ++cases;
  }
  EXPECT_GE(cases, 10);
}

TEST(DecisionFile, WritesWhatItReads) {
  const auto c = parse(continue_text(3, 900));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->rung, 3);
  EXPECT_EQ(c->budget, 900);
  EXPECT_FALSE(parse(kEnd));
}

}  // namespace
}  // namespace dl::decision
