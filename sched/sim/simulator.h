// dl-sim's engine: replays a job trace on a GPU cluster under one of two policies,
// fifo-backfill (plain Slurm 22.05's main and backfill schedulers, cons_tres placement,
// no preemption) and dl (this project's policy, through the plugins' own core code),
// and charges checkpointable jobs dlrun's checkpoints, restores and requeue holds. The
// policies and the cost model at length: docs/design/simulator.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sched/priority.h"
#include "sched/trace.h"

namespace dl::sim {

enum class Policy { fifo_backfill, dl };

// "fifo-backfill" or "dl"; throws InputError otherwise.
Policy parse_policy(std::string_view name);
std::string_view to_string(Policy policy);

// dl-sim's --shapes: the dl policy's gang shapes, their placement and the schedulers.
enum class Shapes {
  // job_submit/dl's default: whole exclusive nodes, placed best fit.
  pack,
  // The same shapes placed as select/cons_tres places them, under Slurm's own
  // schedulers (as even_first): what the plugins' defaults get from Slurm.
  pack_first,
  // job_submit/dl's --dl-placement=even (dl::even_split, shared nodes) and, when that
  // does not fit now, another even split (dl::even_splits); best fit, dl-sim's own
  // backfill.
  even,
  // The first even split only (the one shape job_submit/dl gives a job), placed as
  // select/cons_tres places it, under Slurm's own schedulers as for fifo-backfill:
  // Slurm's backfill pass (backfill.h; no shorter holes of a time_min), and jobs below
  // a blocked head preempt only there, off the nodes reserved for higher jobs. What the
  // plugins get from Slurm: the calibration against slurmctld.
  even_first,
  // site_factor/dl's reshape=yes under Slurm's schedulers: as even_first, and at each of
  // site_factor/dl's samples (every priority.interval) the same reshape pass
  // (dl::ReshapePass) gives a pending job whose split does not fit now another even
  // split that does; the job keeps it. even_first with priority.reshape means this.
  even_reshaped,
};

// "pack", "pack-first", "even", "even-first" or "even-reshaped"; throws InputError
// otherwise.
Shapes parse_shapes(std::string_view name);

// Whether shapes are placed as select/cons_tres places them, under Slurm's schedulers.
inline bool cons_tres_placement(Shapes shapes) {
  return shapes == Shapes::pack_first || shapes == Shapes::even_first ||
         shapes == Shapes::even_reshaped;
}

struct Options {
  Policy policy = Policy::dl;
  std::uint32_t nodes = 100;
  std::uint32_t gpus_per_node = 4;
  std::uint32_t nodes_per_switch = 0;  // 0: no leaf switches
  double limit_factor = 3;             // time limit = duration x U(1, limit_factor),
  bool round_limits = true;            // rounded up to a round value (else a minute)
  std::uint64_t seed = 1;              // for the time limits
  double restore_s = 60;
  double ckpt_every_s = 600;
  double grace_s = 120;
  double bf_interval_s = 30;
  std::uint32_t bf_depth = 500;
  double bf_window_s = 86400;
  double bf_resolution_s = 60;
  // The controller's clock at the trace's time 0 (seconds; only its remainder modulo
  // bf_resolution and 30 s matters): Slurm aligns backfill reservations to
  // bf_resolution and the will-run test's time windows to 30 s on its clock (the
  // epoch), not on the trace's. Slurm's backfill model (fifo-backfill, and dl with
  // cons_tres_placement(shapes)) uses it.
  double clock_offset_s = 0;
  // Slurm holds a requeued job for the credential lifetime (AuthInfo cred_expire,
  // 120 s by default) plus one second before it may start again.
  double requeue_delay_s = 121;
  bool record_runs = false;      // Result::runs
  PriorityParams priority;       // dl: weights, aging and the preemption margin, or queues
  Shapes shapes = Shapes::pack;  // dl
  // dl: a reference no scheduler can run, for what knowing every job's run time would
  // gain (shortest remaining processing time, in GPU-seconds). Pending jobs in order of
  // their remaining GPU-time, read from the trace (the least first; equal ones in submit
  // order), and a pending job preempts a running checkpointable one with at least
  // kClairvoyantMargin times its remaining GPU-time, in the window after a periodic
  // checkpoint as with discretized queues. priority's queues and starvation guard do
  // not apply; its interval (the window, reshaping) does.
  bool clairvoyant = false;
};

inline constexpr double kClairvoyantMargin = 2;

// Whether preempt/dl's rules for discretized queues apply: preemption in the window
// after a periodic checkpoint, by jobs below a blocked head and in backfill passes.
inline bool windowed_preemption(const Options& o) {
  return o.policy == Policy::dl && (o.priority.discretized() || o.clairvoyant);
}

// The shapes a run models: even_first with site_factor/dl's reshape=yes is what the
// plugins do with it, even_reshaped.
inline Shapes modelled_shapes(const Options& o) {
  return o.priority.reshape && o.shapes == Shapes::even_first ? Shapes::even_reshaped : o.shapes;
}

// One job's life in the simulation, for comparisons with a real controller.
struct JobOutcome {
  std::uint64_t id = 0;
  std::string name;  // the trace's job_id
  double submit_s = 0;
  double start_s = 0;  // first start
  double end_s = 0;    // completion
};

// A run's events, in time order, when Options::record_runs: "start", "preempt",
// "deadline" (stopped at the end of a backfill hole), "eligible" (the requeue hold is
// over) and "end". work_done_s: the work its checkpoints have saved at that point.
struct RunEvent {
  std::string job;  // the trace's job_id
  double t = 0;
  std::string event;
  double work_done_s = 0;
};

struct Result {
  std::size_t jobs = 0;
  double avg_jct_s = 0;
  double p50_jct_s = 0;
  double p95_jct_s = 0;
  double avg_queue_s = 0;  // submit to first start
  // Time-averaged GPUs in use (by running jobs, restores included; GPUs a shape holds
  // but the job does not use are not) / cluster GPUs, from the first to the last
  // submit: while jobs still arrive, not the tail when the longest ones finish.
  double gpu_util = 0;
  // Time-averaged idle GPUs while a pending job could fit in that many (its GPUs <=
  // the idle GPUs) / cluster GPUs, over the same interval: capacity a scheduler left
  // unused with work waiting (a reservation, a shape, fragmentation).
  double idle_while_fit = 0;
  // The same, counted only while a pending job fits on one node's idle GPUs (its GPUs
  // <= the most idle on a node): what is left once the idle GPUs only a job split over
  // nodes could use are taken out.
  double idle_while_node_fit = 0;
  double makespan_s = 0;               // first submit to last completion
  std::uint64_t split_small_jobs = 0;  // gangs of <= G GPUs placed over several nodes
  std::uint64_t preemptions = 0;
  // Pending jobs given another even split by the reshape pass (even_reshaped), each
  // time: what site_factor/dl logs as "reshaped from".
  std::uint64_t reshapes = 0;
  double lost_gpu_s = 0;
  std::vector<JobOutcome> outcomes;  // in submit order
  std::vector<RunEvent> runs;        // with Options::record_runs
};

// The time limit a user gives a job of `duration_s` seconds: the duration times
// 1 + (limit_factor - 1) x u (u in [0, 1)), rounded up to one of the round values
// users pick (Tsafrir, Etsion and Feitelson, "Modeling user runtime estimates",
// JSSPP 2005: a score of values cover 90% of jobs): 1, 2, 5, 10, 15, 30 minutes,
// 1, 2, 4, 8, 12, 24, 48, 72 hours, then whole weeks.
// With round = false: to whole minutes only.
double user_time_limit(double duration_s, double u, double limit_factor, bool round = true);

// The progress (seconds of work after the restore) a run has saved in its periodic
// checkpoints by run time `run_s` (seconds since the run started, its `restore_s` of
// loading a checkpoint included), as dlrun writes them (launcher/agreement.h,
// next_periodic_round): it asks for the first round at run time ckpt_every, for each
// next one at the first point of the grid k x ckpt_every at least ckpt_every / 2 after
// the previous one ended, and a round asked for while the run is still restoring
// completes when the restore is over (rounds otherwise take no time). So the checkpoints
// fall on preempt/dl's grid: with restore_s <= ckpt_every_s at run times ckpt_every,
// 2 x ckpt_every, ...; with a longer restore the first is at its end and saves nothing
// new, the next at the first point of the grid ckpt_every / 2 after it. 0 before the
// first checkpoint that saves work.
double saved_progress(double run_s, double restore_s, double ckpt_every_s);

class Simulator {
 public:
  // Throws InputError for options out of range and for a job that can never run on
  // the cluster.
  Simulator(std::vector<TraceJob> trace, const Options& options);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  Result run();
  // Processes every event up to time t (seconds of the trace).
  void run_until(double t);

  // The main scheduler's next decision at the current time: the job at the head of
  // the queue and the GPUs it starts on, after stopping `victims`; `alloc` is empty
  // when the head has to wait. Changes nothing.
  struct Decision {
    std::optional<std::uint64_t> job;
    std::vector<std::uint64_t> victims;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> alloc;  // (node, GPUs)
  };
  Decision decide() const;

  std::size_t pending() const;
  std::size_t running() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

inline Result simulate(std::vector<TraceJob> trace, const Options& options) {
  return Simulator(std::move(trace), options).run();
}

}  // namespace dl::sim
