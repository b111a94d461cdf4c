// `dl-exp plot` (exp/plot.h): the rungs of a search, from dl-search's status, and how the
// gnuplot script marks them.
#include "exp/plot.h"

#include <gtest/gtest.h>

namespace dl::exp {
namespace {

using nlohmann::json;

// Rungs of 2, 4 and 8 steps: t001 promoted twice and completed, t002 promoted once and
// stopped at rung 1, t003 stopped at rung 0 (not promoted), t004 stopped by the user
// before it reached rung 0, t005 still waiting at rung 0.
json status() {
  return {{"rungs", {2, 4, 8}},
          {"trials",
           {{{"id", "t001"},
             {"state", "completed"},
             {"rung", 2},
             {"rung_values", {{"0", 0.5}, {"1", 0.4}, {"2", 0.3}}}},
            {{"id", "t002"},
             {"state", "stopped"},
             {"rung", 1},
             {"rung_values", {{"0", 0.6}, {"1", 0.55}}}},
            {{"id", "t003"}, {"state", "stopped"}, {"rung", 0}, {"rung_values", {{"0", 0.9}}}},
            {{"id", "t004"}, {"state", "stopped"}, {"rung", 0}, {"rung_values", json::object()}},
            {{"id", "t005"}, {"state", "waiting"}, {"rung", 0}, {"rung_values", {{"0", 0.7}}}}}}};
}

std::vector<std::string> ids(const std::vector<RungPoint>& points) {
  std::vector<std::string> out;
  for (const auto& p : points) out.push_back(p.trial);
  return out;
}

TEST(RungMarks, PromotedStoppedAndCompletedPerRung) {
  const auto marks = rung_marks(status());
  ASSERT_EQ(marks.size(), 3u);
  EXPECT_EQ(marks[0].budget, 2);
  EXPECT_EQ(ids(marks[0].promoted), (std::vector<std::string>{"t001", "t002"}));
  EXPECT_EQ(ids(marks[0].stopped), (std::vector<std::string>{"t003", "t004"}));
  EXPECT_EQ(marks[0].stopped[0].value, 0.9);
  EXPECT_FALSE(marks[0].stopped[1].value.has_value());  // stopped before the rung
  EXPECT_EQ(ids(marks[1].promoted), (std::vector<std::string>{"t001"}));
  EXPECT_EQ(ids(marks[1].stopped), (std::vector<std::string>{"t002"}));
  EXPECT_EQ(marks[2].budget, 8);
  EXPECT_TRUE(marks[2].promoted.empty());
  EXPECT_EQ(ids(marks[2].completed), (std::vector<std::string>{"t001"}));
}

TEST(PlotScript, MarksEachRungAtTheStepItsMetricIsTakenAndItsTrials) {
  const std::string s =
      plot_script("e", "loss", {{"t001", "/tmp/a.dat"}}, "out.svg", rung_marks(status()));
  // The metric of a rung of 2 steps is that of step 1.
  EXPECT_NE(s.find("set arrow from 1, graph 0 to 1, graph 1 nohead"), std::string::npos) << s;
  EXPECT_NE(s.find("set arrow from 3, graph 0 to 3, graph 1 nohead"), std::string::npos) << s;
  EXPECT_NE(s.find("set arrow from 7, graph 0 to 7, graph 1 nohead"), std::string::npos) << s;
  EXPECT_NE(s.find("set label \"rung 0: 2 steps\\npromoted t001 t002\\nstopped t003 t004\" at 1,"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("\"rung 2: 8 steps\\ncompleted t001\" at 7,"), std::string::npos) << s;
  // The values at the rungs as points: promoted (t001, t002 at 1; t001 at 3), stopped
  // (t003 at 1, t002 at 3; t004 has none).
  EXPECT_NE(s.find("$promoted << EOD\n1 0.5\n1 0.59999999999999998\n3 0.40000000000000002\nEOD\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("$stopped << EOD\n1 0.90000000000000002\n3 0.55000000000000004\nEOD\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("$promoted using 1:2 with points"), std::string::npos) << s;
  EXPECT_NE(s.find("$stopped using 1:2 with points"), std::string::npos) << s;
}

TEST(PlotScript, NoRungsNoMarks) {
  const std::string s = plot_script("e", "loss", {{"t001", "/tmp/a.dat"}}, "out.png");
  EXPECT_EQ(s.find("set arrow"), std::string::npos);
  EXPECT_EQ(s.find("$promoted"), std::string::npos);
}

TEST(PlotScript, LabelsAreEscapedAndLongListsShortened) {
  RungMark m;
  m.budget = 3;
  for (int i = 0; i < 9; ++i) m.stopped.push_back({"t\"" + std::to_string(i), std::nullopt});
  const std::string s = plot_script("e", "loss", {}, "out.png", {m});
  EXPECT_NE(s.find("stopped t\\\"0 t\\\"1 t\\\"2 t\\\"3 t\\\"4 t\\\"5 +3 more\""),
            std::string::npos)
      << s;
  EXPECT_EQ(s.find("$stopped"), std::string::npos);  // no values, no points
}

}  // namespace
}  // namespace dl::exp
