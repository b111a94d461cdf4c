// Job traces for dl-sim: CSV with a header row,
//   job_id,submit_s,duration_s,num_gpu[,user[,checkpointable]]
// (see shared/workloads/README.md). A malformed row is rejected with its line number
// and the reason.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace dl {

struct TraceJob {
  std::uint64_t id = 0;
  double submit_s = 0;     // from the start of the trace, >= 0
  double duration_s = 0;   // on its GPUs, started at once and never stopped, > 0
  std::uint32_t gpus = 0;  // >= 1
  std::string user;
  bool checkpointable = false;
};

// Parses a whole trace. Throws InputError "line N: <what is wrong>" for the first
// malformed line (header included), and for a job id used twice. Blank lines are
// skipped; fields may be surrounded by spaces; CRLF line ends are accepted.
std::vector<TraceJob> parse_trace(std::string_view text);

// Writes a trace with all six columns, in a form parse_trace() reads back exactly.
void write_trace(std::ostream& out, const std::vector<TraceJob>& jobs);

}  // namespace dl
