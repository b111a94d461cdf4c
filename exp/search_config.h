// The experiment file of `dl-search submit` (YAML, man/dl-search.1), read into what the
// driver needs: the experiment's name and root, the trial's command and sbatch options,
// and the searcher's configuration (exp/searcher.h). Every error names the file, the
// line and what is allowed, e.g.
//   "search.yaml:7: searcher.divisor: expected a number > 1, not 'one'".
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exp/searcher.h"

namespace dl::exp::search {

struct Experiment {
  std::string name;
  std::string root;  // empty: DL_EXP_ROOT, else $HOME/.slurm-dl/experiments
  std::string command;
  std::vector<std::string> sbatch;  // options as given, one per list item
  Config searcher;
};

// Parses the YAML text of `file` (the name is used in messages only). Throws
// dl::InputError "<file>:<line>: <reason>".
Experiment parse_experiment(const std::string& file, const std::string& text);

// The normalized form kept in the experiment's directory (search.json): the driver
// restarts from it, so a later edit of the YAML file cannot change a running search.
nlohmann::json to_json(const Experiment& e);
Experiment experiment_from_json(const nlohmann::json& j);

}  // namespace dl::exp::search
