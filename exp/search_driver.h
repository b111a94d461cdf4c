// The driver of a hyperparameter search (`dl-search`, man/dl-search.1): the adapter that
// turns the searcher's operations (exp/searcher.h) into Slurm jobs and the jobs'
// outcomes, read back from the tracking store (exp/store.h), into the searcher's events.
// Its journal makes a driver killed at any instant carry on with no trial submitted
// twice and no result lost; a trial may continue to its next rung in the same job. Both
// are described in docs/design/search.md.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "exp/search_config.h"
#include "exp/searcher.h"

namespace dl::exp::search {

// <root>/<experiment>/search.json, the normalized experiment file.
std::string spec_path(const std::string& root, const std::string& experiment);

// Writes search.json for a new experiment (checked first: an experiment of that name
// with another search is an InputError naming it); the same search again is accepted,
// which restarts its driver.
void create_experiment(const std::string& root, const Experiment& e);
Experiment load_experiment(const std::string& root, const std::string& experiment);

// The driver's journal replayed (no Slurm involved): the searcher as the driver left
// it, the operations with their jobs, and the pause/stop requests.
struct Replay {
  std::vector<Op> ops;
  std::map<std::int64_t, double> intent;     // op -> time of its intent record
  std::map<std::int64_t, std::string> jobs;  // op -> job id
  // op -> the job it was to continue in (an intent of an in-job continuation)
  std::map<std::int64_t, std::string> in_job_intent;
  std::map<std::int64_t, bool> done;  // stop and complete ops carried out
  std::string control = "running";    // running, paused or stopped (newest request)
  bool finished = false;              // the driver recorded the end of the search
  // Requests about single trials: trial -> running, paused or stopped (its newest; a
  // stop is final).
  std::map<std::string, std::string> trial_control;
};
Replay replay(const std::string& root, const Experiment& e, Searcher& searcher);

// Appends a pause ("paused"), resume ("resume") or stop ("stopped") request for the
// driver (a journal of its own), for the whole experiment or, with `trial`, for one trial.
// Only the experiment's owner may (an InputError naming the owner otherwise). A trial
// request is checked against the journal first: an unknown trial is an InputError naming
// it and the trials that exist; so is a trial that has ended (pause, stop) or is not
// paused (resume). Nothing is written after a refusal.
void request(const std::string& root, const std::string& experiment, const std::string& what,
             const std::string& trial = "");

struct DriveOptions {
  double poll_seconds = 0.5;
};

// Runs the search until it is complete or stopped; returns the exit code.
int drive(const std::string& root, const std::string& experiment, const DriveOptions& options);

// `dl-search status`: the searcher's state, the driver's, and the best trial.
nlohmann::json status(const std::string& root, const std::string& experiment);

}  // namespace dl::exp::search
