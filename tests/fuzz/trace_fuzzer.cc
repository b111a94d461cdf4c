// libFuzzer target for the trace CSV reader (and, on small traces, the simulator that
// reads it): any input either parses or throws dl::InputError; an accepted trace
// holds only valid jobs, survives write -> parse unchanged, and replays to the end
// under both policies without crashing.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <unordered_set>

#include "core/error.h"
#include "sched/sim/simulator.h"
#include "sched/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<dl::TraceJob> jobs;
  try {
    jobs = dl::parse_trace(text);
  } catch (const dl::InputError&) {
    return 0;
  }
  std::unordered_set<std::uint64_t> ids;
  for (const auto& j : jobs) {
    const bool valid = j.gpus >= 1 && std::isfinite(j.submit_s) && j.submit_s >= 0 &&
                       std::isfinite(j.duration_s) && j.duration_s > 0 && ids.insert(j.id).second;
    if (!valid) std::abort();
  }
  std::ostringstream out;
  dl::write_trace(out, jobs);
  const auto again = dl::parse_trace(out.str());
  if (again.size() != jobs.size()) std::abort();
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto &a = jobs[i], &b = again[i];
    if (a.id != b.id || a.submit_s != b.submit_s || a.duration_s != b.duration_s ||
        a.gpus != b.gpus || a.user != b.user || a.checkpointable != b.checkpointable) {
      std::abort();
    }
  }
  if (jobs.size() > 20) return 0;
  for (const auto& j : jobs) {
    if (j.gpus > 16 || j.submit_s > 1e7 || j.duration_s > 1e7) return 0;
  }
  for (const auto policy : {dl::sim::Policy::fifo_backfill, dl::sim::Policy::dl}) {
    dl::sim::Options o;
    o.policy = policy;
    o.nodes = 4;
    o.gpus_per_node = 4;
    o.nodes_per_switch = 2;
    const auto r = dl::sim::simulate(jobs, o);
    // A job of 1e-31 s can end at its submit time: JCTs are >= 0, not > 0.
    if (r.jobs != jobs.size() || !std::isfinite(r.avg_jct_s) || r.avg_jct_s < 0 ||
        r.split_small_jobs > jobs.size()) {
      std::abort();
    }
  }
  return 0;
}
