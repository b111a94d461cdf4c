// dl-search: hyperparameter search whose trials are Slurm jobs (man/dl-search.1).
//   dl-search submit FILE.yaml [--as-job]   check the file, create the experiment, drive it
//   dl-search drive EXP                      (re)start the driver of an experiment
//   dl-search status EXP [--json]            trials, rungs, best trial
//   dl-search pause|resume|stop EXP [TRIAL]   the whole search, or one trial
// Exit codes: 0; 2 for bad input (the file, an unknown experiment); 1 when it failed.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/cli.h"
#include "core/error.h"
#include "core/sysio.h"
#include "exp/journal.h"
#include "exp/search_config.h"
#include "exp/search_driver.h"

namespace dl::exp::search {
namespace {

using dl::sys::getenv_opt;
using nlohmann::json;

std::string self_path() {
  char buf[PATH_MAX + 1] = {};
  const ssize_t n = ::readlink("/proc/self/exe", buf, PATH_MAX);
  if (n <= 0) throw SystemError("couldn't read /proc/self/exe");
  return std::string(buf, static_cast<std::size_t>(n));
}

void print_status(const json& s) {
  std::printf("EXPERIMENT %s  SEARCHER %s  METRIC %s (%s)  RUNGS",
              s["experiment"].get<std::string>().c_str(),
              s["searcher"]["name"].get<std::string>().c_str(),
              s["searcher"]["metric"].get<std::string>().c_str(),
              s["searcher"]["mode"].get<std::string>().c_str());
  for (const auto& r : s["rungs"])
    std::printf(" %lld", static_cast<long long>(r.get<std::int64_t>()));
  const std::string state = s["finished"].get<bool>()
                                ? (s["control"] == "stopped" ? "stopped" : "complete")
                                : s["control"].get<std::string>();
  std::printf("  STATE %s\n", state.c_str());
  struct Row {
    std::string id, state;
    int rung, restarts;
    std::string jobs, values, hparams;
  };
  std::vector<Row> rows;
  for (const auto& t : s["trials"]) {
    // Its jobs and the rungs each ran, "5:0-1 9:2": job 5 ran rungs 0 and 1 (the second
    // continued in the job), job 9 rung 2.
    std::vector<std::pair<std::string, std::pair<int, int>>> jobs;
    for (const auto& o : s["operations"]) {
      if (o["trial"] != t["id"] || (o["kind"] != "create" && o["kind"] != "resume")) continue;
      const std::string job = o["job"].get<std::string>();
      if (job.empty()) continue;
      const int rung = o["rung"].get<int>();
      if (!jobs.empty() && jobs.back().first == job) {
        jobs.back().second.second = rung;
      } else {
        jobs.push_back({job, {rung, rung}});
      }
    }
    std::string job_text;
    for (const auto& [job, r] : jobs) {
      job_text += (job_text.empty() ? "" : " ") + job + ":" + std::to_string(r.first) +
                  (r.second != r.first ? "-" + std::to_string(r.second) : "");
    }
    std::string values;
    for (const auto& [rung, v] : t["rung_values"].items()) {
      values += (values.empty() ? "" : " ") + rung + ":" + fmt::format("{:.4g}", v.get<double>());
    }
    std::string state = t["state"].get<std::string>();
    const std::string pause = t.value("pause", std::string("none"));
    if (state == "running" || state == "waiting") {
      if (pause == "pausing" || pause == "paused") {
        state = "paused";
      } else if (pause == "queued" || pause == "unpausing") {
        state = "resuming";  // resumed; waits for a free slot (or for its hold to end)
      } else if (t.value("control", std::string()) == "paused") {
        state = "paused";  // requested; the driver has not seen it yet
      }
    }
    rows.push_back({t["id"].get<std::string>(), state, t["rung"].get<int>(),
                    t["restarts"].get<int>(), job_text.empty() ? "-" : job_text,
                    values.empty() ? "-" : values, t["hparams"].dump()});
  }
  // The JOBS and VALUES columns as wide as their widest entry (long job ids).
  int jobs_w = 16, values_w = 30;
  for (const auto& r : rows) {
    jobs_w = std::max(jobs_w, static_cast<int>(r.jobs.size()));
    values_w = std::max(values_w, static_cast<int>(r.values.size()));
  }
  std::printf("%-6s %-10s %-5s %-9s %-*s %-*s %s\n", "TRIAL", "STATE", "RUNG", "RESTARTS", jobs_w,
              "JOBS", values_w, "VALUES", "HPARAMS");
  for (const auto& r : rows) {
    std::printf("%-6s %-10s %-5d %-9d %-*s %-*s %s\n", r.id.c_str(), r.state.c_str(), r.rung,
                r.restarts, jobs_w, r.jobs.c_str(), values_w, r.values.c_str(), r.hparams.c_str());
  }
  std::printf("BEST %s\n",
              s["best"].get<std::string>().empty() ? "-" : s["best"].get<std::string>().c_str());
}

int main_impl(int argc, char** argv) {
  CLI::App app{"dl-search: hyperparameter search (ASHA, random, grid) whose trials are Slurm jobs"};
  app.require_subcommand(1);
  add_standard_flags(app, "dl-search");
  std::string root_opt;
  app.add_option("--root", root_opt,
                 "the experiments' root (default DL_EXP_ROOT, else ~/.slurm-dl/experiments)");

  std::string file;
  bool as_job = false;
  std::string experiment;
  bool json_out = false;
  double poll = 0.5;
  auto* submit =
      app.add_subcommand("submit", "check FILE, create its experiment and drive the search");
  submit->add_option("file", file, "the experiment file (YAML)")->required();
  submit->add_flag("--as-job", as_job, "run the driver as a Slurm job instead of here");
  submit->add_option("--poll", poll, "seconds between looks at the trials' jobs")
      ->check(CLI::Range(0.05, 60.0));
  auto* drive_cmd =
      app.add_subcommand("drive", "start the driver of EXP again (after it was killed)");
  drive_cmd->add_option("experiment", experiment)->required();
  drive_cmd->add_option("--poll", poll, "seconds between looks at the trials' jobs")
      ->check(CLI::Range(0.05, 60.0));
  auto* status_cmd = app.add_subcommand("status", "the search's trials, rungs and best trial");
  status_cmd->add_option("experiment", experiment)->required();
  status_cmd->add_flag("--json", json_out, "print JSON instead of a table");
  std::string trial;
  CLI::App* control[3];
  const char* verbs[3] = {"pause", "resume", "stop"};
  const char* helps[3] = {
      "hold the search (no new runs, pending ones held), or TRIAL alone (it checkpoints and "
      "is held)",
      "carry on after pause (the search, or TRIAL from its own checkpoint)",
      "cancel every trial's job and end the search, or end TRIAL alone (its checkpoints "
      "kept; the search goes on)"};
  for (int i = 0; i < 3; ++i) {
    control[i] = app.add_subcommand(verbs[i], helps[i]);
    control[i]->add_option("experiment", experiment)->required();
    control[i]->add_option("trial", trial, "one trial of the search (t001, ...)");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    const std::string env_root = root_opt.empty() ? experiments_root(getenv_opt) : root_opt;
    DriveOptions options;
    options.poll_seconds = poll;
    if (submit->parsed()) {
      std::string text;
      try {
        text = sys::read_file(file, 1 << 20);
      } catch (const std::exception& e) {
        throw InputError(fmt::format("{}: {}", file, e.what()));
      }
      Experiment e = parse_experiment(file, text);
      const std::string root = e.root.empty() ? env_root : e.root;
      e.root = root;
      create_experiment(root, e);
      std::fprintf(stderr, "dl-search: experiment '%s' in %s\n", e.name.c_str(),
                   experiment_dir(root, e.name).c_str());
      if (as_job) {
        const std::string cmd =
            fmt::format("'{}' --root '{}' drive '{}' --poll {}", self_path(), root, e.name, poll);
        const std::string sb = fmt::format(
            "sbatch --parsable -J dls-driver.{} --output={}/driver.%j.out --wrap \"{}\"", e.name,
            experiment_dir(root, e.name), cmd);
        const int rc = std::system(sb.c_str());
        return rc == 0 ? 0 : 1;
      }
      return drive(root, e.name, options, *libslurm_jobs());
    }
    if (drive_cmd->parsed()) return drive(env_root, experiment, options, *libslurm_jobs());
    if (status_cmd->parsed()) {
      const json s = status(env_root, experiment);
      if (json_out) {
        std::cout << s.dump(2) << "\n";
      } else {
        print_status(s);
      }
      return 0;
    }
    for (int i = 0; i < 3; ++i) {
      if (!control[i]->parsed()) continue;
      request(env_root, experiment, i == 0 ? "paused" : i == 1 ? "resume" : "stopped", trial);
      if (trial.empty()) {
        std::fprintf(stderr, "dl-search: %s requested for '%s'\n", verbs[i], experiment.c_str());
      } else {
        std::fprintf(stderr, "dl-search: %s requested for trial '%s' of '%s'\n", verbs[i],
                     trial.c_str(), experiment.c_str());
      }
    }
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "dl-search: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dl-search: %s\n", e.what());
    return 1;
  }
}

}  // namespace
}  // namespace dl::exp::search

int main(int argc, char** argv) { return dl::exp::search::main_impl(argc, argv); }
