// `dl-exp plot`: metric curves per trial, drawn by gnuplot (Debian's gnuplot-nox). The
// pure part writes the gnuplot script; plot_with_gnuplot runs gnuplot on it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dl::exp {

struct Curve {
  std::string trial;
  std::string data_file;  // "step value" lines
};

// The terminal for `output` by its extension: "png" or "svg"; throws dl::InputError
// naming the option otherwise.
std::string plot_terminal(const std::string& output);

// One rung of a search (`dl-search`), as the plot marks it: a dashed line at the step
// whose metric ranks the trials (budget - 1), labelled with its budget and the trials
// promoted from it and stopped at it, and those trials' values there as points.
struct RungPoint {
  std::string trial;
  std::optional<double> value;  // the metric at the rung (none: stopped before reaching it)
};
struct RungMark {
  int rung = 0;
  std::int64_t budget = 0;
  std::vector<RungPoint> promoted;   // went on to the next rung
  std::vector<RungPoint> stopped;    // stopped there (not promoted, or by dl-search stop)
  std::vector<RungPoint> completed;  // the last rung: trained to the full budget
};

// The rungs of a search from `dl-search status --json`'s object (its "rungs" and
// "trials": state, rung, rung_values).
std::vector<RungMark> rung_marks(const nlohmann::json& search_status);

// A gnuplot script drawing `curves` of `metric` into `output`, and the rungs if any.
std::string plot_script(const std::string& experiment, const std::string& metric,
                        const std::vector<Curve>& curves, const std::string& output,
                        const std::vector<RungMark>& rungs = {});

// Runs `gnuplot script_file` (no shell); throws with gnuplot's exit status.
void run_gnuplot(const std::string& script_file);

}  // namespace dl::exp
