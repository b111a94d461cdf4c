// A hyperparameter search's files, without Slurm (docs/design/search.md): the experiment
// file (search.json), the driver's journal (its intent, submitted, done and events
// records) replayed into the searcher's state, the pause/resume/stop requests, and the
// status built from them. dl-search's driver (exp/search_driver.h) writes the journal;
// dl-exp reads a search's state through this file alone.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
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

// A searcher event as the journal records it (replay reads it back).
nlohmann::json event_json(const Event& e);

// The pause/resume/stop requests (control.*.jsonl in `journals`): the newest for the
// experiment, and per trial the newest (a stop is final), each as running, paused or
// stopped.
struct Controls {
  std::string experiment = "running";
  std::map<std::string, std::string> trials;
};
Controls read_controls(const std::string& journals);

// Appends a pause ("paused"), resume ("resume") or stop ("stopped") request for the
// driver (a journal of its own), for the whole experiment or, with `trial`, for one trial.
// Only the experiment's owner may (an InputError naming the owner otherwise). A trial
// request is checked against the journal first: an unknown trial is an InputError naming
// it and the trials that exist; so is a trial that has ended (pause, stop) or is not
// paused (resume). Nothing is written after a refusal.
void request(const std::string& root, const std::string& experiment, const std::string& what,
             const std::string& trial = "");

// `dl-search status`: the searcher's state, the driver's, and the best trial.
nlohmann::json status(const std::string& root, const std::string& experiment);

}  // namespace dl::exp::search
