// dl-sim's job record and time constants, shared by the simulator's parts
// (simulator.cc runs the jobs, backfill.cc reads them in its passes).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "sched/sim/placement.h"
#include "sched/trace.h"

namespace dl::sim {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kEps = 1e-6;

enum class State : std::uint8_t { future, requeued, pending, running, done };

struct Job {
  TraceJob t;
  double limit = 0;                // the user's time limit, whole minutes
  std::uint32_t user = 0;          // t.user, numbered in the order of first appearance
  std::optional<double> time_min;  // dl: checkpointable jobs may run in shorter holes
  std::uint32_t nodes = 1;         // dl: nodes of the shape
  std::uint32_t per_node = 0;      // dl: GPUs per node of the shape
  std::uint32_t hold = 0;          // GPUs held while running
  // dl, even shapes: the other even splits (nodes, GPUs per node), tried in order when
  // the first (nodes, per_node) does not fit.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> more_shapes;
  State state = State::future;
  double eligible = 0;   // pending since
  double waited = 0;     // seconds pending before that (earlier waits)
  double work_done = 0;  // progress kept (from the last checkpoint at run start)
  double attained = 0;   // GPU-seconds of finished runs
  double run_start = 0;
  double run_restore = 0;
  double completion = 0;  // when the current run completes the job
  double est_end = 0;     // the scheduler's view: start + time limit of this run
  std::optional<double> slot_end;
  std::uint64_t epoch = 0;  // invalidates end events of earlier runs
  std::uint32_t runs = 0;
  std::size_t running_pos = 0;
  double first_start = -1;
  double finish = 0;
  bool split = false;
  double queue_key = 0;
  std::vector<Alloc> alloc;
};

}  // namespace dl::sim
