// dl-jobs' view of a user's DL jobs: which jobs are DL jobs, what their status line
// says, and the table or JSON a person or a script reads. Pure: the adapter
// (launcher/dl_jobs.cc) fills JobRow from libslurm.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/status.h"

namespace dl {

using SystemTime = std::chrono::system_clock::time_point;

struct JobRow {
  std::string id;  // "123", or "100_3" for an array task
  std::string name;
  std::string user;
  std::string partition;
  std::string state;           // Slurm's: PENDING, RUNNING, ...
  std::string reason;          // why it waits (Slurm's reason), "" when it does not
  std::string comment;         // the whole job comment
  std::uint32_t requeues = 0;  // Slurm's restart count
  std::string nodes;           // allocated nodes, "" while pending
  std::optional<SystemTime> submit;
  std::optional<SystemTime> start;  // actual, or Slurm's expected start while pending
};

// A job is a DL job when job_submit/dl or dlrun wrote its comment ("dl: ..." or
// "dl | ...").
bool is_dl_comment(std::string_view comment);

// The status line back from its text ("RUNNING step 1200, ckpt 1100 (2m ago), loss=0.31");
// nullopt when the comment has none (a job that has not run under dlrun yet).
std::optional<Status> parse_status(std::string_view comment);

// How many times the job started again: Slurm's requeues, or more when the status line
// counts dlrun's restarts inside the allocation too (the program's DL_RESTART_COUNT).
std::uint32_t restarts_of(const JobRow& row);

// The shape job_submit/dl gave the job ("16 GPUs as 2x8, preemptible"); "" if none.
std::string shape_of(std::string_view comment);

// When a pending job is expected to start, as people say it: "in 5m (at 14:05)",
// "unknown" when Slurm has no estimate yet. For a running job: "started 3h ago".
std::string describe_start(const JobRow& row, SystemTime now);

nlohmann::json to_json(const std::vector<JobRow>& rows, SystemTime now);
std::string format_table(const std::vector<JobRow>& rows, SystemTime now);

}  // namespace dl
