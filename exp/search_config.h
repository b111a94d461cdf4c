// The experiment file of `dl-search submit` (YAML, man/dl-search.1), read into what the
// driver needs: the experiment's name and root, the trial's command and sbatch options,
// and the searcher's configuration (exp/searcher.h). Every error names the file, the
// line and what is allowed, e.g.
//   "search.yaml:7: searcher.divisor: expected a number > 1, not 'one'".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "exp/searcher.h"

namespace dl::exp::search {

struct Experiment {
  std::string name;
  std::string root;  // empty: DL_EXP_ROOT, else $HOME/.slurm-dl/experiments
  std::string command;
  std::vector<std::string> sbatch;  // options as given, one per list item
  double step_seconds = 0;          // trial.step_seconds; 0: not given
  Config searcher;
};

// The --time-min, in whole minutes, of a run of `steps` steps at e.step_seconds a step:
// one rung, so that backfill can place a preemptible trial in a hole that fits it, plus
// job_submit/dl's warning time (the --dl-grace of e.sbatch, else 120 s, + 30 s: dlrun
// checkpoints and stops that long before the end of a job started at its time_min).
// Nothing when the file gives no step_seconds or its --dl-grace does not parse.
std::optional<std::int64_t> rung_time_min(const Experiment& e, std::int64_t steps);

// job_submit/dl's warning time in seconds (the --dl-grace of e.sbatch, else 120 s, + 30
// s), or nothing when that --dl-grace does not parse.
std::optional<double> warning_seconds(const Experiment& e);

// Parses the YAML text of `file` (the name is used in messages only). Throws
// dl::InputError "<file>:<line>: <reason>".
Experiment parse_experiment(const std::string& file, const std::string& text);

// The normalized form kept in the experiment's directory (search.json): the driver
// restarts from it, so a later edit of the YAML file cannot change a running search.
nlohmann::json to_json(const Experiment& e);
Experiment experiment_from_json(const nlohmann::json& j);

}  // namespace dl::exp::search
