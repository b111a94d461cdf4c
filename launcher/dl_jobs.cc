// dl-jobs: the user's deep-learning jobs at a glance, read from slurmctld through
// libslurm (not by parsing squeue): state and why a job waits, Slurm's expected start,
// the shape job_submit/dl gave it, and what dlrun's status line says (step, last
// checkpoint, metrics), with the restart count. See man/dl-jobs.1.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "core/cli.h"
#include "launcher/jobs_view.h"
#include "launcher/slurm_job.h"

namespace dl {
namespace {

constexpr int kExitUsage = 2;

int run(int argc, char** argv) {
  CLI::App app{
      "dl-jobs: your deep-learning jobs at a glance (state, expected start, shape, step, "
      "last checkpoint, metrics, restarts)"};
  bool json = false;
  bool all_users = false;
  bool include_other = false;
  std::vector<std::string> ids;
  app.add_flag("--json", json, "one JSON object {\"jobs\": [...]} instead of a table");
  app.add_flag("-a,--all-users", all_users, "every user's jobs, not only yours");
  app.add_flag("--all-jobs", include_other, "also jobs that use no --dl-* option");
  app.add_option("jobid", ids, "only these jobs (\"123\", or \"100_3\" for an array task)");
  add_standard_flags(app, "dl-jobs");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }

  const auto rows =
      slurm::list_jobs(all_users ? std::nullopt : std::optional<std::uint32_t>(getuid()));
  std::vector<JobRow> shown;
  for (const auto& r : rows) {
    if (!include_other && !is_dl_comment(r.comment)) continue;
    if (!ids.empty() && std::find(ids.begin(), ids.end(), r.id) == ids.end()) continue;
    shown.push_back(r);
  }
  const auto now = std::chrono::system_clock::now();
  if (json) {
    std::cout << to_json(shown, now).dump(2) << '\n';
  } else if (shown.empty()) {
    std::cout << "no DL jobs" << (all_users ? "" : " of yours") << " in the queue\n";
  } else {
    std::cout << format_table(shown, now);
  }
  return 0;
}

}  // namespace
}  // namespace dl

int main(int argc, char** argv) { return dl::run_tool("dl-jobs", dl::run, argc, argv); }
