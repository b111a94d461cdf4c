// dl-stats: where a job's time went (queued, requeue waits, starting, restarts,
// checkpointing, training) and what its GPUs did (GPU-hours allocated and used, each
// GPU's average utilization and memory peak), from the records rank 0's dlrun keeps for
// each run of the job (launcher/run_stats.h), joined with what slurmctld says of a job
// it still knows. See man/dl-stats.1.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "core/cli.h"
#include "core/error.h"
#include "launcher/run_stats.h"
#include "launcher/slurm_job.h"

namespace dl {
namespace {

constexpr int kExitUsage = 2;

// What slurmctld says of the job now; gone when it does not know it (any more).
JobNow job_now(const std::string& id) {
  try {
    for (const auto& row : slurm::list_jobs(getuid())) {
      if (row.id != id) continue;
      if (row.state == "RUNNING") return JobNow::running;
      if (row.state == "PENDING" || row.state == "REQUEUED") return JobNow::pending;
      return JobNow::gone;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dl-stats: %s (the report ends at the newest record)\n", e.what());
  }
  return JobNow::gone;
}

int run(int argc, char** argv) {
  CLI::App app{
      "dl-stats: where a job's time went (queued, requeue waits, starting, restarts, "
      "checkpointing, training) and what its GPUs did"};
  std::string job;
  bool json = false;
  std::string dir;
  app.add_option("jobid", job, "the job (\"123\", or \"100_3\" for an array task)")->required();
  app.add_flag("--json", json, "one JSON object instead of the report");
  app.add_option("--dir", dir,
                 "where the runs' records are (default $DL_STATS_DIR, else ~/.slurm-dl/jobs)");
  add_standard_flags(app, "dl-stats");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  try {
    if (dir.empty()) dir = stats_root(std::getenv("DL_STATS_DIR"), std::getenv("HOME"));
    std::vector<std::string> skipped;
    auto records = load_run_records(dir, job, &skipped);
    for (const auto& s : skipped) std::fprintf(stderr, "dl-stats: skipped %s\n", s.c_str());
    if (records.empty()) {
      std::fprintf(stderr,
                   "dl-stats: no run of job %s is recorded in %s (dlrun records every run of "
                   "the jobs it runs there)\n",
                   job.c_str(), dir.c_str());
      return 1;
    }
    const auto report = make_report(std::move(records), WallClock::now(), job_now(job));
    if (json) {
      std::cout << to_json(report).dump(2) << '\n';
    } else {
      std::cout << format_report(report);
    }
  } catch (const InputError& e) {
    std::fprintf(stderr, "dl-stats: %s\n", e.what());
    return kExitUsage;
  }
  return 0;
}

}  // namespace
}  // namespace dl

int main(int argc, char** argv) { return dl::run_tool("dl-stats", dl::run, argc, argv); }
