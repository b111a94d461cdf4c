// The experiment file of dl-search (exp/search_config.h): a good file and its normalized
// form; a bad one rejected with the file, the line and the reason.
#include "exp/search_config.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace dl::exp::search {
namespace {

const char* kGood = R"(name: quad
trial:
  command: srun dlrun /usr/bin/python3 train.py
  sbatch: [-p, low, --dl-gpus=1]
  step_seconds: 0.5
hyperparameters:
  lr: {type: log, minval: 0.0001, maxval: 1}
  layers: {type: int, minval: 1, maxval: 4}
  momentum: {type: float, minval: 0, maxval: 0.9}
  act: {type: categorical, values: [relu, tanh, 3, true]}
searcher:
  name: asha
  metric: loss
  mode: min
  max_trials: 8
  max_concurrent_trials: 4
  divisor: 2
  max_rungs: 3
  budget: 8
  seed: 11
)";

std::string error_of(const std::string& text) {
  try {
    parse_experiment("exp.yaml", text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "accepted";
}

std::string with(const std::string& from, const std::string& to) {
  std::string s = kGood;
  const auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

TEST(SearchConfig, ReadsAGoodFile) {
  const Experiment e = parse_experiment("exp.yaml", kGood);
  EXPECT_EQ(e.name, "quad");
  EXPECT_EQ(e.command, "srun dlrun /usr/bin/python3 train.py");
  EXPECT_EQ(e.sbatch, (std::vector<std::string>{"-p", "low", "--dl-gpus=1"}));
  ASSERT_EQ(e.searcher.space.size(), 4u);
  EXPECT_EQ(e.searcher.space[0].name, "lr");
  EXPECT_EQ(e.searcher.space[0].kind, ParamKind::log_real);
  EXPECT_EQ(e.searcher.space[1].kind, ParamKind::integer);
  EXPECT_EQ(e.searcher.space[3].choices, (std::vector<nlohmann::json>{"relu", "tanh", 3, true}));
  EXPECT_EQ(e.searcher.divisor, 2);
  EXPECT_EQ(e.searcher.budget, 8);
  EXPECT_EQ(e.searcher.seed, 11u);
  EXPECT_EQ(e.step_seconds, 0.5);
  // The normalized form reads back to the same search.
  const Experiment back = experiment_from_json(to_json(e));
  EXPECT_EQ(to_json(back), to_json(e));
  // The names search.json has always used (searches begun before keep reading back).
  const nlohmann::json j = to_json(e);
  EXPECT_EQ(j["hyperparameters"][0]["type"], "log");
  EXPECT_EQ(j["hyperparameters"][1]["type"], "int");
  EXPECT_EQ(j["hyperparameters"][3]["type"], "categorical");
  EXPECT_EQ(j["searcher"]["name"], "asha");
  EXPECT_EQ(j["searcher"]["mode"], "min");
  Searcher a(e.searcher), b(back.searcher);
  EXPECT_EQ(a.start().front().hparams, b.start().front().hparams);
}

TEST(SearchConfig, RejectsWithFileLineAndReason) {
  EXPECT_EQ(error_of(with("divisor: 2", "divisor: one")),
            "exp.yaml:17: searcher.divisor: expected a number, not 'one'");
  EXPECT_EQ(error_of(with("divisor: 2", "divisor: 1")),
            "exp.yaml:17: searcher.divisor: expected a number > 1, not '1'");
  EXPECT_EQ(error_of(with("name: asha", "name: hyperband")),
            "exp.yaml:12: searcher.name: 'hyperband': expected asha, random or grid");
  EXPECT_EQ(error_of(with("type: log", "type: exp")),
            "exp.yaml:7: hyperparameters.lr.type: 'exp': expected int, float, log or categorical");
  EXPECT_EQ(error_of(with("minval: 0.0001", "minval: 0")),
            "exp.yaml:7: hyperparameters.lr: expected 0 < minval <= maxval (log scale)");
  EXPECT_EQ(error_of(with("max_trials: 8", "max_trials: 0")),
            "exp.yaml:15: searcher.max_trials: expected a whole number from 1 to 100000, not '0'");
  EXPECT_EQ(
      error_of(with("  seed: 11", "  sed: 11")),
      "exp.yaml:20: searcher.sed: unknown key (allowed: asha_mode, budget, continue_in_job, "
      "divisor, max_concurrent_trials, max_restarts, max_rungs, max_trials, metric, mode, name, "
      "seed)");
  EXPECT_EQ(error_of(with("--dl-gpus=1", "--dl-trial=x")),
            "exp.yaml:4: trial.sbatch: --dl-trial=x: dl-search sets it itself");
  EXPECT_EQ(error_of(with("mode: min", "mode: lowest")),
            "exp.yaml:14: searcher.mode: 'lowest': expected min or max");
  EXPECT_EQ(error_of(with("name: quad", "name: ../x")),
            "exp.yaml:1: name '../x': expected 1 to 128 letters, digits or _.- not starting "
            "with '.'");
  EXPECT_EQ(error_of(with("  budget: 8\n", "")),
            "exp.yaml:12: searcher.budget is missing (the "
            "steps of a full training)");
  EXPECT_EQ(error_of(with("step_seconds: 0.5", "step_seconds: 0")),
            "exp.yaml:5: trial.step_seconds: expected seconds per step, > 0 and at most 86400, "
            "not '0'");
  EXPECT_EQ(error_of(with("step_seconds: 0.5", "step_seconds: fast")),
            "exp.yaml:5: trial.step_seconds: expected a number, not 'fast'");
  // Not YAML at all.
  EXPECT_EQ(error_of("name: [unclosed\n"), "exp.yaml:2: end of sequence flow not found");
}

TEST(SearchConfig, DivisorAndMaxRungsDefaultToTwoAndFour) {
  const Experiment e = parse_experiment("exp.yaml", with("  divisor: 2\n  max_rungs: 3\n", ""));
  EXPECT_EQ(e.searcher.divisor, 2);
  EXPECT_EQ(e.searcher.max_rungs, 4);
  EXPECT_EQ(to_json(e)["searcher"]["max_rungs"], 4);  // kept: a later default changes nothing
}

TEST(SearchConfig, AshaMode) {
  EXPECT_EQ(parse_experiment("exp.yaml", kGood).searcher.asha_mode, AshaMode::promotion);
  const Experiment e =
      parse_experiment("exp.yaml", with("  seed: 11\n", "  seed: 11\n  asha_mode: stopping\n"));
  EXPECT_EQ(e.searcher.asha_mode, AshaMode::stopping);
  EXPECT_EQ(to_json(e)["searcher"]["asha_mode"], "stopping");
  EXPECT_EQ(experiment_from_json(to_json(e)).searcher.asha_mode, AshaMode::stopping);
  // A search.json written before asha_mode existed is a promotion search.
  nlohmann::json old = to_json(e);
  old["searcher"].erase("asha_mode");
  EXPECT_EQ(experiment_from_json(old).searcher.asha_mode, AshaMode::promotion);
  EXPECT_EQ(error_of(with("  seed: 11\n", "  seed: 11\n  asha_mode: eager\n")),
            "exp.yaml:21: searcher.asha_mode: expected promotion or stopping, got 'eager'");
  EXPECT_EQ(error_of(with("name: asha", "name: random").append("  asha_mode: stopping\n")),
            "exp.yaml:21: searcher.asha_mode: only for asha, not random");
}

TEST(SearchConfig, ContinueInJobIsOnForAshaUnlessTheFileTurnsItOff) {
  const Experiment on = parse_experiment("exp.yaml", kGood);
  EXPECT_TRUE(on.searcher.continue_in_job);
  EXPECT_EQ(to_json(on)["searcher"]["continue_in_job"], true);
  const Experiment off =
      parse_experiment("exp.yaml", with("  seed: 11\n", "  seed: 11\n  continue_in_job: false\n"));
  EXPECT_FALSE(off.searcher.continue_in_job);
  EXPECT_FALSE(experiment_from_json(to_json(off)).searcher.continue_in_job);
  // A search.json written before it: every rung a job of its own, as it began.
  nlohmann::json old = to_json(on);
  old["searcher"].erase("continue_in_job");
  EXPECT_FALSE(experiment_from_json(old).searcher.continue_in_job);
  EXPECT_EQ(error_of(with("  seed: 11\n", "  seed: 11\n  continue_in_job: maybe\n")),
            "exp.yaml:21: searcher.continue_in_job: expected true or false, not 'maybe'");
  EXPECT_EQ(error_of(with("name: asha", "name: random").append("  continue_in_job: true\n")),
            "exp.yaml:21: searcher.continue_in_job: only for asha (its rungs), not random");
}

// A file without step_seconds (and a search.json written before it) gives no time_min.
TEST(SearchConfig, StepSecondsIsOptional) {
  const Experiment e = parse_experiment("exp.yaml", with("  step_seconds: 0.5\n", ""));
  EXPECT_EQ(e.step_seconds, 0);
  nlohmann::json j = to_json(e);
  j.erase("step_seconds");
  EXPECT_EQ(experiment_from_json(j).step_seconds, 0);
}

// One rung's steps at step_seconds a step plus --dl-grace + 30 s, in whole minutes.
TEST(SearchConfig, RungTimeMin) {
  Experiment e = parse_experiment("exp.yaml", kGood);  // no --dl-grace: 120 s
  EXPECT_EQ(rung_time_min(e, 0), std::nullopt);
  EXPECT_EQ(rung_time_min(e, 1), 3);     // 0.5 + 150 s
  EXPECT_EQ(rung_time_min(e, 60), 3);    // 30 + 150 s
  EXPECT_EQ(rung_time_min(e, 61), 4);    // 30.5 + 150 s
  e.sbatch.push_back("--dl-grace=30s");  // 40 x 0.5 + 60 s
  EXPECT_EQ(rung_time_min(e, 40), 2);
  e.sbatch.back() = "--dl-grace";
  e.sbatch.push_back("1h");
  EXPECT_EQ(rung_time_min(e, 40), 61);  // 20 + 3630 s
  e.sbatch.back() = "soon";             // sbatch rejects it
  EXPECT_EQ(rung_time_min(e, 40), std::nullopt);
  e.sbatch.pop_back();
  e.sbatch.pop_back();
  e.step_seconds = 0;
  EXPECT_EQ(rung_time_min(e, 40), std::nullopt);
}

}  // namespace
}  // namespace dl::exp::search
