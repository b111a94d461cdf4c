// dl-sim's backfill passes: dl-sim's own (GPU totals over time in a Profile, node
// reservations for the highest blocked job) and Slurm 22.05's (node reservations for
// every job, select/cons_tres' placement, its will-run test). A pass reads the
// simulation and starts or preempts jobs through a BackfillHost.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "sched/sim/job.h"
#include "sched/sim/placement.h"
#include "sched/sim/simulator.h"

namespace dl::sim {

// Free GPUs over time as steps, for dl-sim's own backfill reservations: free_[i] holds
// on [times_[i], times_[i+1]); the last step lasts forever. Times are multiples of
// `resolution` from `now` (Slurm's backfill works in such slots, 60 s by default),
// which also keeps the number of steps small.
class Profile {
 public:
  // `free_now` GPUs free now; releases: (time, GPUs) freed then, rounded up to a slot.
  Profile(double now, double resolution, std::int64_t free_now,
          std::vector<std::pair<double, std::int64_t>> releases);

  // Earliest start in [from, before) of a window of `d` seconds with `g` GPUs free
  // throughout; infinity when there is none.
  double earliest(std::int64_t g, double d, double from, double before) const;

  // First time >= from at which fewer than g GPUs are free (infinity: never).
  double window_end(std::int64_t g, double from) const;

  // Takes g GPUs on [s, e), widened to whole slots.
  void occupy(double s, double e, std::int64_t g);

 private:
  double round_up(double t) const;
  double round_down(double t) const;
  std::size_t step_at(double t) const;
  std::size_t split_at(double t);
  double now_;
  double res_;
  std::vector<double> times_;
  std::vector<std::int64_t> free_;
};

// What a backfill pass reads of the simulation and does to it. Jobs are indices into
// jobs(); the state is read afresh after every action.
class BackfillHost {
 public:
  virtual double now() const = 0;
  virtual const std::vector<Job>& jobs() const = 0;
  virtual const std::vector<std::uint32_t>& running() const = 0;
  virtual const std::vector<std::uint32_t>& free() const = 0;  // per node
  virtual std::int64_t free_total() const = 0;
  // Where job i starts now, off the nodes `off` (empty when it does not fit).
  virtual std::vector<Alloc> place(std::uint32_t i,
                                   const std::vector<std::uint32_t>& off) const = 0;
  // Starts job i; `slot_end`: it is stopped then (the end of a backfill hole).
  virtual void start(std::uint32_t i, const std::vector<Alloc>& alloc,
                     std::optional<double> slot_end) = 0;
  // The dl policy in Slurm's pass (backfill_preempts): preempt/dl's victim candidates
  // for job i, the victims and placement that start it off the nodes `off`, a
  // preemption.
  virtual std::vector<std::uint32_t> victim_candidates(std::uint32_t i) const = 0;
  virtual Simulator::Decision preempt_for(std::uint32_t i, const std::vector<char>& off) const = 0;
  virtual void preempt(std::uint32_t i) = 0;

 protected:
  ~BackfillHost() = default;
};

// Whether the backfill pass is Slurm's: fifo-backfill, and the dl policy with shapes
// placed as Slurm places them (the calibration against slurmctld).
bool slurm_backfill(const Options& o);

// Whether a backfill pass may preempt (the dl policy in Slurm's backfill with
// discretized queues): it then runs every bf_interval while jobs wait, as Slurm's does,
// since a victim qualifies as time passes (just_checkpointed).
bool backfill_preempts(const Options& o);

// One backfill pass over `order`, the pending jobs it looks at, highest priority first
// (bf_max_job_test): Slurm's when slurm_backfill(o), else dl-sim's own.
void backfill_pass(BackfillHost& host, const Options& o, const std::vector<std::uint32_t>& order);

}  // namespace dl::sim
