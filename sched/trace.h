// Job traces for dl-sim: CSV with a header row naming the columns, in any order:
//   job_id, submit_s, duration_s, num_gpu (required), user, checkpointable (optional);
// other columns are ignored (see shared/workloads/README.md and bench/sched/traces.md
// for converting public traces). A malformed row is rejected with its line number and
// the reason.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace dl {

struct TraceJob {
  // The job_id as a number when every job_id of the trace is a whole number, else the
  // job's row (1, 2, ...) among the trace's jobs; `name` is the job_id as written.
  std::uint64_t id = 0;
  double submit_s = 0;     // from the start of the trace, >= 0
  double duration_s = 0;   // on its GPUs, started at once and never stopped, > 0
  std::uint32_t gpus = 0;  // >= 1
  std::string user;
  bool checkpointable = false;
  std::string name;  // empty: `id`
};

// Parses a whole trace. Throws InputError "line N: <what is wrong>" for the first
// malformed line (header included: a required column missing, a column named twice),
// and for a job id used twice. Blank lines are
// skipped; fields may be surrounded by spaces; CRLF line ends are accepted.
std::vector<TraceJob> parse_trace(std::string_view text);

// Writes a trace with all six columns (job_id: the name, or else the id), in a form
// parse_trace() reads back exactly.
void write_trace(std::ostream& out, const std::vector<TraceJob>& jobs);

}  // namespace dl
