// `dl-exp plot`: metric curves per trial, drawn by gnuplot (Debian's gnuplot-nox). The
// pure part writes the gnuplot script; plot_with_gnuplot runs gnuplot on it.
#pragma once

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

// A gnuplot script drawing `curves` of `metric` into `output`.
std::string plot_script(const std::string& experiment, const std::string& metric,
                        const std::vector<Curve>& curves, const std::string& output);

// Runs `gnuplot script_file` (no shell); throws with gnuplot's exit status.
void run_gnuplot(const std::string& script_file);

}  // namespace dl::exp
