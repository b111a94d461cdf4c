// dl-search's decision files (in-job continuation): a trial that has run its rung inside
// its job asks whether the job goes on to the next rung, and the driver answers in a
// file. In the directory DL_SEARCH_DECISIONS, for trial T in Slurm job J at rung R:
//   T.J.rR        the decision, created once with link(2) so that the first one holds:
//                 "continue <next rung> <its step budget>\n" or "end\n"
//   T.J.rR.wait   written by the trial's rank 0 while it waits: "<its last step>\n"
// Header-only: the driver (exp/) and the C++ client share it. The Python client
// (python/slurm_dl/__init__.py) implements the same; tests/unit/client/decision_cases.txt
// holds the cases both are checked against.
#pragma once

#include <cctype>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dl::decision {

inline constexpr std::string_view kWaitSuffix = ".wait";
inline constexpr std::string_view kEnd = "end\n";

inline std::string file_name(const std::string& trial, const std::string& job, long long rung) {
  return trial + "." + job + ".r" + std::to_string(rung);
}

inline std::string continue_text(long long rung, long long budget) {
  return "continue " + std::to_string(rung) + " " + std::to_string(budget) + "\n";
}

struct Continue {
  long long rung = 0;
  long long budget = 0;
};

// The continuation a decision holds; nullopt for "end" and for anything else (a trial
// goes on only when told so exactly).
inline std::optional<Continue> parse(std::string_view text) {
  std::vector<std::string> words(1);
  for (const char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!words.back().empty()) words.emplace_back();
    } else {
      words.back() += c;
    }
  }
  if (words.back().empty()) words.pop_back();
  const auto number = [](const std::string& w) -> std::optional<long long> {
    if (w.empty() || w.size() > 18 || w.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    return std::stoll(w);
  };
  if (words.size() != 3 || words[0] != "continue") return std::nullopt;
  const auto rung = number(words[1]);
  const auto budget = number(words[2]);
  if (!rung || !budget) return std::nullopt;
  return Continue{*rung, *budget};
}

}  // namespace dl::decision
