#include "sched/sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "core/error.h"
#include "sched/gang.h"
#include "sched/preempt.h"
#include "sched/sim/backfill.h"
#include "sched/sim/job.h"
#include "sched/sim/metrics.h"
#include "sched/sim/placement.h"

namespace dl::sim {
namespace {

// Slurm-like uniform draws that do not depend on the standard library's distributions.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

enum class Kind : std::uint8_t { end, eligible, backfill, promote, tick, reshape };

struct Event {
  double t;
  Kind kind;
  std::uint32_t job;
  std::uint64_t epoch;
  bool operator>(const Event& o) const { return t > o.t; }
};
constexpr std::uint32_t kNoJob = std::numeric_limits<std::uint32_t>::max();

}  // namespace

double user_time_limit(double duration_s, double u, double limit_factor, bool round) {
  const double want = duration_s * (1 + (limit_factor - 1) * u);
  if (!round) return std::ceil(want / 60) * 60;
  static constexpr double kRound[] = {60,   120,   300,   600,   900,   1800,   3600,
                                      7200, 14400, 28800, 43200, 86400, 172800, 259200};
  for (const double v : kRound) {
    if (want <= v) return v;
  }
  constexpr double kWeek = 7 * 86400;
  return std::ceil(want / kWeek) * kWeek;
}

double saved_progress(double run_s, double restore_s, double ckpt_every_s) {
  if (!(ckpt_every_s > 0)) return 0;
  restore_s = std::max(restore_s, 0.0);
  // The run time of the first checkpoint that saves work after the restore: with a
  // longer restore, the first point of the grid half an interval after the round that
  // ended with the restore. From then on every round completes when it is asked for, at
  // each point of the grid.
  const double first =
      restore_s <= ckpt_every_s
          ? ckpt_every_s
          : std::ceil((restore_s + ckpt_every_s / 2) / ckpt_every_s - kEps) * ckpt_every_s;
  if (run_s + kEps < first) return 0;
  const double last = first + std::floor((run_s + kEps - first) / ckpt_every_s) * ckpt_every_s;
  return std::max(0.0, last - restore_s);
}

Policy parse_policy(std::string_view name) {
  if (name == "fifo-backfill") return Policy::fifo_backfill;
  if (name == "dl") return Policy::dl;
  throw InputError(fmt::format("--policy={}: expected fifo-backfill or dl", name));
}

Shapes parse_shapes(std::string_view name) {
  if (name == "pack") return Shapes::pack;
  if (name == "pack-first") return Shapes::pack_first;
  if (name == "even") return Shapes::even;
  if (name == "even-first") return Shapes::even_first;
  if (name == "even-reshaped") return Shapes::even_reshaped;
  throw InputError(fmt::format(
      "--shapes={}: expected pack, pack-first, even, even-first or even-reshaped", name));
}

std::string_view to_string(Policy policy) { return policy == Policy::dl ? "dl" : "fifo-backfill"; }

struct Simulator::Impl {
  // The pending jobs a backfill pass looks at, highest priority first (bf_max_job_test).
  std::vector<std::uint32_t> backfill_order() const;
  Options o;
  std::vector<Job> jobs;  // in submit order
  std::vector<std::uint32_t> free;
  std::vector<std::uint32_t> leaf_of;
  std::uint32_t leaves = 0;
  std::int64_t free_total = 0;
  std::vector<std::uint32_t> nodes_with_free;  // histogram: nodes by free GPUs
  std::size_t next_arrival = 0;
  std::size_t done = 0;
  double now = 0;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  // Pending jobs, best first: fifo by submit time, dl by -dl::queue_key (which keeps
  // the order of dl::priority_points while they wait).
  std::set<std::pair<double, std::uint32_t>> queue;
  FinishedJobs finished;  // queues=pNN: the jobs finished, as site_factor/dl keeps them
  std::vector<std::uint32_t> running;
  std::uint64_t version = 0;
  // A backfill pass can only start something new after GPUs were released or a job
  // arrived that fits in the free GPUs: otherwise every window only moved later.
  bool backfill_useful = false;
  bool backfill_queued = false;
  double tick_at = kInf;  // the next checkpoint tick queued
  struct {
    std::uint32_t job = kNoJob;
    std::uint64_t version = 0;
    double at = 0;
  } preempt_failed;
  mutable std::vector<std::uint32_t> scratch;
  std::uint64_t preemptions = 0;
  std::uint64_t reshapes = 0;
  double lost_gpu_s = 0;
  Usage usage;  // the metrics' integrals

  Impl(std::vector<TraceJob> trace, const Options& options) : o(options) {
    check_options();
    o.shapes = modelled_shapes(o);
    std::stable_sort(trace.begin(), trace.end(), [](const TraceJob& a, const TraceJob& b) {
      return a.submit_s != b.submit_s ? a.submit_s < b.submit_s : a.id < b.id;
    });
    free.assign(o.nodes, o.gpus_per_node);
    free_total = std::int64_t{o.nodes} * o.gpus_per_node;
    nodes_with_free.assign(o.gpus_per_node + 1, 0);
    nodes_with_free[o.gpus_per_node] = o.nodes;
    leaf_of.resize(o.nodes);
    Capacity capacity;
    capacity.node_gpus.assign(o.nodes, o.gpus_per_node);
    for (std::uint32_t k = 0; k < o.nodes; ++k) {
      leaf_of[k] = o.nodes_per_switch ? k / o.nodes_per_switch : 0;
      if (o.nodes_per_switch) {
        if (capacity.leaf_switches.size() <= leaf_of[k]) capacity.leaf_switches.emplace_back();
        capacity.leaf_switches[leaf_of[k]].push_back(k);
      }
    }
    leaves = static_cast<std::uint32_t>(capacity.leaf_switches.size());
    std::mt19937_64 rng(o.seed);
    jobs.reserve(trace.size());
    std::unordered_map<std::string, std::uint32_t> users;
    for (auto& t : trace) {
      Job j;
      j.user = users.try_emplace(t.user, static_cast<std::uint32_t>(users.size())).first->second;
      j.limit = user_time_limit(t.duration_s, uniform01(rng), o.limit_factor, o.round_limits);
      if (o.policy == Policy::dl) {
        Shape s;
        try {
          if (o.shapes != Shapes::pack && o.shapes != Shapes::pack_first) {
            // job_submit/dl's shape for --dl-placement=even, then the other even splits.
            s = fit_gang(Gang{t.gpus, Placement::even, std::nullopt, std::nullopt}, capacity,
                         "dl-sim");
            const auto all = even_splits(t.gpus, o.gpus_per_node, o.nodes);
            const bool others = o.shapes == Shapes::even;
            for (std::size_t k = 1; others && k < all.size(); ++k) {
              j.more_shapes.emplace_back(all[k].nodes_min, all[k].gpus_per_node);
            }
          } else {
            s = fit_gang(Gang{t.gpus, Placement::pack, std::nullopt, std::nullopt}, capacity,
                         "dl-sim");
          }
        } catch (const InputError& e) {
          throw InputError(
              fmt::format("job {}: {}", t.name.empty() ? std::to_string(t.id) : t.name, e.what()));
        }
        j.nodes = s.nodes_min;
        j.per_node = s.gpus_per_node;
        j.hold = s.nodes_min * s.gpus_per_node;
        if (t.checkpointable) {
          const auto tm = backfill_time_min(std::chrono::seconds(std::llround(o.grace_s)),
                                            std::chrono::seconds(std::llround(j.limit)));
          if (tm) j.time_min = static_cast<double>(tm->count());
        }
      } else {
        if (t.gpus > free_total) {
          throw InputError(
              fmt::format("job {} asks for {} GPUs; the cluster has {}", t.id, t.gpus, free_total));
        }
        j.hold = t.gpus;
      }
      j.t = std::move(t);
      jobs.push_back(std::move(j));
    }
    scratch.reserve(o.nodes);
    if (!jobs.empty()) usage = Usage(jobs.front().t.submit_s, jobs.back().t.submit_s);
    if (o.policy == Policy::dl && o.shapes == Shapes::even_reshaped && !jobs.empty()) {
      // site_factor/dl samples every interval from its start.
      const double every = static_cast<double>(o.priority.interval.count());
      events.push({std::ceil(jobs.front().t.submit_s / every) * every, Kind::reshape, kNoJob, 0});
    }
  }

  void check_options() const {
    const auto bad = [](const char* what) { return InputError(what); };
    if (o.nodes < 1 || o.nodes > 1000000) throw bad("--nodes: expected 1 to 1000000");
    if (o.gpus_per_node < 1 || o.gpus_per_node > 1024) {
      throw bad("--gpus-per-node: expected 1 to 1024");
    }
    if (!(o.limit_factor >= 1 && o.limit_factor <= 1000)) {
      throw bad("--limit-factor: expected a number from 1 to 1000");
    }
    if (!(o.restore_s >= 0) || !(o.ckpt_every_s > 0) || !(o.grace_s >= 0)) {
      throw bad("--restore-cost and --grace must be >= 0, --ckpt-every > 0");
    }
    if (!(o.requeue_delay_s >= 0)) throw bad("--requeue-delay: expected a number >= 0");
    if (!(o.bf_resolution_s >= 1) || o.bf_window_s / o.bf_resolution_s > 1e7) {
      throw bad("--bf-resolution: expected at least 1 s and at most 1e7 slots in --bf-window");
    }
    if (!(o.bf_interval_s > 0) || o.bf_depth < 1 || !(o.bf_window_s > 0)) {
      throw bad("--bf-interval and --bf-window must be > 0, --bf-depth >= 1");
    }
    if (o.clairvoyant && o.policy != Policy::dl) throw bad("--clairvoyant: only with --policy dl");
  }

  // ---------------------------------------------------------------- cluster
  void set_free(std::uint32_t node, std::uint32_t value) {
    --nodes_with_free[free[node]];
    free_total += std::int64_t{value} - free[node];
    free[node] = value;
    ++nodes_with_free[value];
  }

  // site_factor/dl's reshape=yes at one of its samples: the pending jobs in their order
  // through the same pass (dl::ReshapePass); a job reshaped keeps its new split, as in
  // Slurm. Every node has CPUs enough.
  void reshape_pass() {
    if (queue.empty()) return;
    std::vector<FreeNode> f;
    f.reserve(free.size());
    for (const auto g : free) f.push_back({g, std::numeric_limits<std::uint32_t>::max() / 2});
    ReshapePass::Partition all;
    all.nodes.resize(o.nodes);
    std::iota(all.nodes.begin(), all.nodes.end(), std::size_t{0});
    all.gpus_per_node = o.gpus_per_node;
    ReshapePass pass(std::move(f), {std::move(all)});
    constexpr std::size_t kLooked = 1000;  // as site_factor/dl
    std::size_t looked = 0;
    for (auto it = queue.begin(); it != queue.end() && looked < kLooked; ++it, ++looked) {
      Job& j = jobs[it->second];
      Shape s;
      s.nodes_min = s.nodes_max = j.nodes;
      s.gpus_per_node = j.per_node;
      // As reshape_note: a gang on several nodes that holds exactly its GPUs.
      const bool reshapable = j.nodes >= 2 && j.nodes * j.per_node == j.t.gpus;
      const auto to = pass.next({0, s, 1}, [&] {
        return reshapable ? std::optional<std::uint32_t>(j.t.gpus) : std::nullopt;
      });
      if (!to) continue;
      j.nodes = to->nodes_min;
      j.per_node = to->gpus_per_node;
      ++version;
      ++reshapes;
      record(it->second, "reshape");
    }
  }

  std::int64_t most_free_on_a_node() const {
    for (std::size_t g = nodes_with_free.size(); g-- > 0;) {
      if (nodes_with_free[g] > 0) return static_cast<std::int64_t>(g);
    }
    return 0;
  }

  std::vector<Alloc> place(const Job& j) const {
    if (free_total < j.hold) return {};
    if (o.policy == Policy::fifo_backfill) return place_fifo(free, j.hold);
    // Cheap answers from the histogram before scanning the nodes.
    std::uint64_t fitting = 0;
    const std::uint32_t need = j.per_node;
    for (std::uint32_t g = need; g <= o.gpus_per_node; ++g) fitting += nodes_with_free[g];
    if (fitting >= j.nodes) {
      auto alloc = cons_tres_placement(o.shapes)
                       ? place_dl_cons_tres(free, j.nodes, j.per_node)
                       : place_dl(free, j.nodes, j.per_node, leaf_of, leaves);
      if (!alloc.empty()) return alloc;
    }
    return place_other_shapes(free, j);
  }

  std::vector<Alloc> place_other_shapes(const std::vector<std::uint32_t>& f, const Job& j) const {
    for (const auto& [nodes, per_node] : j.more_shapes) {
      std::uint64_t fitting = 0;
      for (std::uint32_t g = per_node; g <= o.gpus_per_node; ++g) fitting += nodes_with_free[g];
      if (&f == &free && fitting < nodes) continue;
      auto alloc = place_dl(f, nodes, per_node, leaf_of, leaves);
      if (!alloc.empty()) return alloc;
    }
    return {};
  }

  // ---------------------------------------------------------------- queue
  void enqueue(std::uint32_t i) {
    Job& j = jobs[i];
    j.state = State::pending;
    j.eligible = now;
    j.queue_key = key_of(j);
    if (o.policy == Policy::dl && o.priority.discretized() && !o.clairvoyant && j.attained > 0) {
      // The starvation guard: promoted to queue 0 once it has waited long enough.
      const double after = starving_after(j.attained / j.hold, o.priority);
      if (after != kInf && after > j.waited) {
        events.push({now + (after - j.waited), Kind::promote, i, j.epoch});
      }
    }
    queue.emplace(j.queue_key, i);
    usage.add_pending(j.hold);
    backfill_useful |= j.hold <= free_total;
    ++version;
  }

  // The pending order: fifo by submit time; dl by -dl::queue_key (which keeps the order
  // of dl::priority_points while they wait), or with discretized queues by queue, then
  // by how long the job has waited over its life (FIFO within a queue); clairvoyant by
  // remaining GPU-time (which does not change while the job waits).
  double key_of(const Job& j) const {
    if (o.policy == Policy::fifo_backfill) return j.t.submit_s;
    if (o.clairvoyant) return remaining_gpu_s(j);
    const double since = j.eligible - j.waited;
    if (!o.priority.discretized()) return -queue_key(j.attained, since, o.priority);
    const double wait = j.waited + now - j.eligible;
    return pending_queue(j.attained, wait, j.hold, o.priority) * 1e13 + since;
  }

  void promote(std::uint32_t i) {
    Job& j = jobs[i];
    queue.erase({j.queue_key, i});
    j.queue_key = key_of(j);
    queue.emplace(j.queue_key, i);
    ++version;
  }

  void dequeue(std::uint32_t i) {
    queue.erase({jobs[i].queue_key, i});
    usage.remove_pending(jobs[i].hold);
  }

  std::optional<std::uint32_t> head() const {
    if (queue.empty()) return std::nullopt;
    return queue.begin()->second;
  }

  // ---------------------------------------------------------------- runs
  std::vector<RunEvent> runs;
  void record(std::uint32_t i, const char* event) {
    if (!o.record_runs) return;
    const Job& j = jobs[i];
    runs.push_back({j.t.name.empty() ? std::to_string(j.t.id) : j.t.name, now, event, j.work_done});
  }

  double progress_now(const Job& j) const {
    return std::max(0.0, now - j.run_start - j.run_restore);
  }

  // Clairvoyant: the GPU-seconds job j still needs, as of `progress` seconds into its
  // current run (0 when it is not running).
  double remaining_gpu_s(const Job& j, double progress = 0) const {
    return j.hold * std::max(0.0, j.t.duration_s - j.work_done - progress);
  }

  void start(std::uint32_t i, const std::vector<Alloc>& alloc, std::optional<double> slot_end) {
    Job& j = jobs[i];
    dequeue(i);
    j.waited += now - j.eligible;
    for (const auto& a : alloc) set_free(a.node, free[a.node] - a.gpus);
    j.alloc = alloc;
    usage.add_used(j.t.gpus);
    j.state = State::running;
    j.run_start = now;
    j.run_restore = j.runs > 0 ? o.restore_s : 0;
    ++j.runs;
    if (j.first_start < 0) j.first_start = now;
    if (j.t.gpus <= o.gpus_per_node && alloc.size() > 1) j.split = true;
    j.completion = now + j.run_restore + (j.t.duration_s - j.work_done);
    j.slot_end = slot_end;
    j.est_end = now + (slot_end ? *slot_end - now : j.limit);
    const double end = slot_end ? std::min(*slot_end, j.completion) : j.completion;
    events.push({end, Kind::end, i, ++j.epoch});
    record(i, "start");
    j.running_pos = running.size();
    running.push_back(i);
    ++version;
  }

  // Ends the current run; the time it spent restoring its checkpoint is lost.
  void release(std::uint32_t i) {
    Job& j = jobs[i];
    lost_gpu_s += j.hold * std::min(now - j.run_start, j.run_restore);
    for (const auto& a : j.alloc) set_free(a.node, free[a.node] + a.gpus);
    usage.add_used(-std::int64_t{j.t.gpus});
    j.alloc.clear();
    j.attained += j.hold * (now - j.run_start);
    const std::uint32_t last = running.back();
    running[j.running_pos] = last;
    jobs[last].running_pos = j.running_pos;
    running.pop_back();
    ++j.epoch;
    ++version;
    backfill_useful = true;
  }

  void finish(std::uint32_t i) {
    release(i);
    Job& j = jobs[i];
    j.state = State::done;
    j.finish = now;
    record(i, "end");
    ++done;
    if (o.policy == Policy::dl && !o.priority.queue_percentiles.empty()) {
      finished.add({i, j.user, j.attained, std::llround(now)});
      adapt_queues();
    }
  }

  // queues=pNN: the thresholds from the jobs finished so far (site_factor/dl takes them
  // at its next sample, up to an interval later), and the pending jobs in their order.
  void adapt_queues() {
    auto queues = adapted_queues(finished, o.priority);
    if (queues == o.priority.queues) return;
    o.priority.queues = std::move(queues);
    std::set<std::pair<double, std::uint32_t>> rekeyed;
    for (const auto& entry : queue) {
      Job& j = jobs[entry.second];
      j.queue_key = key_of(j);
      rekeyed.emplace(j.queue_key, entry.second);
    }
    queue = std::move(rekeyed);
    ++version;
  }

  // The end of a backfill hole: the job checkpointed in its last `grace` seconds.
  void stop_at_deadline(std::uint32_t i) {
    Job& j = jobs[i];
    const double working = std::max(0.0, now - j.run_start - j.run_restore);
    const double checkpointing = std::min(working, o.grace_s);
    j.work_done += working - checkpointing;
    lost_gpu_s += j.hold * checkpointing;
    record(i, "deadline");
    release(i);
    requeue(i);
  }

  void requeue(std::uint32_t i) {
    jobs[i].state = State::requeued;
    events.push({now + o.requeue_delay_s, Kind::eligible, i, jobs[i].epoch});
  }

  // Preemption: stopped at once, back to its last periodic checkpoint.
  void preempt(std::uint32_t i) {
    Job& j = jobs[i];
    const double progress = progress_now(j);
    const double saved =
        std::min(progress, saved_progress(now - j.run_start, j.run_restore, o.ckpt_every_s));
    j.work_done += saved;
    lost_gpu_s += j.hold * (progress - saved);
    record(i, "preempt");
    ++preemptions;
    release(i);
    requeue(i);
  }

  // ---------------------------------------------------------------- decisions
  class Trial : public VictimTrial {
   public:
    // `off`: nodes the preemptor may not use (a higher job's backfill reservation), or
    // null.
    Trial(const Impl& sim, const Job& preemptor, const std::vector<char>* off = nullptr)
        : sim_(sim), scratch_(sim.scratch), off_(off) {
      scratch_ = sim.free;
      if (off_) {
        for (std::size_t k = 0; k < scratch_.size(); ++k) {
          if ((*off_)[k]) scratch_[k] = 0;
        }
      }
      nodes_ = preemptor.nodes;
      need_ = preemptor.per_node;
      for (const auto f : scratch_) fitting_ += f >= need_;
    }
    void release(const VictimCandidate& v) override {
      for (const auto& a : sim_.jobs[v.id].alloc) change(a.node, static_cast<std::int64_t>(a.gpus));
    }
    void take_back(const VictimCandidate& v) override {
      for (const auto& a : sim_.jobs[v.id].alloc)
        change(a.node, -static_cast<std::int64_t>(a.gpus));
    }
    bool preemptor_fits() const override { return fitting_ >= nodes_; }

   private:
    void change(std::uint32_t node, std::int64_t by) {
      if (off_ && (*off_)[node]) return;
      const bool before = scratch_[node] >= need_;
      scratch_[node] = static_cast<std::uint32_t>(scratch_[node] + by);
      fitting_ += static_cast<std::int64_t>(scratch_[node] >= need_) - before;
    }
    const Impl& sim_;
    std::vector<std::uint32_t>& scratch_;
    const std::vector<char>* off_;
    std::uint32_t nodes_ = 1;
    std::uint32_t need_ = 0;
    std::int64_t fitting_ = 0;
  };

  Decision decide(bool try_preempt) const {
    const auto h = head();
    if (!h) return {};
    return decide_for(*h, try_preempt);
  }

  Decision decide_for(std::uint32_t i, bool try_preempt) const {
    Decision d;
    const std::optional<std::uint32_t> h = i;
    const Job& j = jobs[*h];
    d.job = *h;
    if (auto alloc = place(j); !alloc.empty() || !try_preempt || o.policy != Policy::dl) {
      for (const auto& a : alloc) d.alloc.emplace_back(a.node, a.gpus);
      return d;
    }
    return preempt_for(i, nullptr);
  }

  // The running jobs preempt/dl offers Slurm as victims of job j now
  // (preempt_p_preemptable): checkpointable, outranked by the margin (clairvoyant: with
  // kClairvoyantMargin times j's remaining GPU-time) and, with windowed_preemption,
  // within the window after a periodic checkpoint.
  std::vector<std::uint32_t> victim_candidates(const Job& j) const {
    // The points site_factor/dl would give them; preempt/dl's rule on them.
    const auto points = [&](double attained, double wait, std::uint32_t gpus) {
      return o.priority.discretized()
                 ? static_cast<double>(site_factor(attained, wait, o.priority, gpus))
                 : priority_points(attained, wait, o.priority);
    };
    const double p = points(j.attained, j.waited + now - j.eligible, j.hold);
    std::vector<std::uint32_t> out;
    for (const auto r : running) {
      const Job& v = jobs[r];
      if (!v.t.checkpointable) continue;
      const double attained = v.attained + v.hold * (now - v.run_start);
      if (o.clairvoyant) {
        if (remaining_gpu_s(v, progress_now(v)) < kClairvoyantMargin * remaining_gpu_s(j)) continue;
      } else if (!outranks(p, points(attained, v.waited, v.hold), o.priority)) {
        continue;
      }
      if (windowed_preemption(o) &&
          !just_checkpointed(rule_run_time(v), o.ckpt_every_s, checkpoint_slack())) {
        continue;
      }
      out.push_back(r);
    }
    return out;
  }

  // The victims job i may preempt to start now, on nodes outside `off` (null: any),
  // and its placement then; no allocation when there are none. Changes nothing.
  Decision preempt_for(std::uint32_t i, const std::vector<char>* off) const {
    Decision d;
    d.job = i;
    const Job& j = jobs[i];
    std::vector<Alloc> alloc;
    {
      std::vector<VictimCandidate> candidates;
      std::int64_t reachable = free_total;
      for (const auto r : victim_candidates(j)) {
        const Job& v = jobs[r];
        // The loss as preempt/dl estimates it (victim order); what the victim really
        // loses is preempt()'s.
        candidates.push_back(
            {r, v.hold, seconds_since_checkpoint(now - v.run_start, o.ckpt_every_s), true});
        reachable += v.hold;
      }
      if (reachable >= j.hold) {
        Trial trial(*this, j, off);
        for (const auto& v : choose_victims(std::move(candidates), trial)) {
          d.victims.push_back(v.id);
        }
        if (!d.victims.empty()) {
          // select/cons_tres places the preemptor on what the victims leave.
          alloc = cons_tres_placement(o.shapes)
                      ? place_dl_cons_tres(scratch, j.nodes, j.per_node)
                      : place_dl(scratch, j.nodes, j.per_node, leaf_of, leaves);
          if (alloc.empty()) throw std::logic_error("dl-sim: victims freed no room");
        }
      }
    }
    for (const auto& a : alloc) d.alloc.emplace_back(a.node, a.gpus);
    return d;
  }

  // Slurm's main scheduler: start jobs in priority order until one must wait.
  void main_pass() {
    while (true) {
      const auto h = head();
      if (!h) return;
      const bool retry = preempt_failed.job != *h || preempt_failed.version != version ||
                         now >= preempt_failed.at + o.bf_interval_s;
      const Decision d = decide(retry);
      if (d.alloc.empty()) {
        preempt_failed = {*h, version, now};
        schedule_checkpoint_tick(*h);
        preempt_below_head();
        return;
      }
      for (const auto v : d.victims) preempt(static_cast<std::uint32_t>(v));
      std::vector<Alloc> alloc;
      for (const auto& [node, gpus] : d.alloc) alloc.push_back({node, gpus});
      start(*h, alloc, std::nullopt);
    }
  }

  // The run time preempt/dl's just_checkpointed rule sees of a running job: the time
  // since the run started, restore included, which is also what dlrun's checkpoints
  // count (saved_progress: with a restore no longer than ckpt_every they fall on the
  // rule's grid). With cons_tres_placement (the plugins as slurmctld runs them) as
  // preempt/dl computes it: checkpointed_progress of whole seconds, so a victim
  // qualifies from two seconds after its checkpoint on (rule_lag()); otherwise exact.
  double rule_run_time(const Job& v) const {
    const double run = now - v.run_start;
    return cons_tres_placement(o.shapes) ? checkpointed_progress(std::floor(run + kEps)) : run;
  }
  double rule_lag() const { return cons_tres_placement(o.shapes) ? 2.0 : 0.0; }

  // How long after a periodic checkpoint a job may still be a victim: preempt/dl's two
  // site-factor intervals.
  double checkpoint_slack() const { return 2.0 * static_cast<double>(o.priority.interval.count()); }

  // Discretized queues: the jobs after a blocked head (up to bf_depth) that can start
  // now by preempting jobs of a higher queue than theirs do so, highest first. (In
  // Slurm, preempt/dl answers for every pending job that the main or the backfill
  // scheduler tries, not only for the first.)
  void preempt_below_head() {
    if (!windowed_preemption(o)) return;
    // Slurm's main scheduler tries no lower job of a partition once one has failed in
    // it (job_scheduler.c, failed_parts): they preempt in its backfill pass.
    if (cons_tres_placement(o.shapes)) return;
    std::vector<std::uint32_t> order = backfill_order();
    for (std::size_t k = 1; k < order.size(); ++k) {
      const std::uint32_t i = order[k];
      if (jobs[i].state != State::pending) continue;
      const Decision d = decide_for(i, true);
      if (d.alloc.empty() || d.victims.empty()) continue;
      for (const auto v : d.victims) preempt(static_cast<std::uint32_t>(v));
      std::vector<Alloc> alloc;
      for (const auto& [node, gpus] : d.alloc) alloc.push_back({node, gpus});
      start(i, alloc, std::nullopt);
    }
  }

  // Discretized queues: a running checkpointable job becomes a victim of the head when
  // it has crossed the threshold of the head's queue and is in preempt/dl's window
  // after a periodic checkpoint (k x ckpt_every of run time); the main scheduler looks
  // again at the first such moment (Slurm's runs every sched_interval anyway).
  // Clairvoyant: the first such window while the job still needs kClairvoyantMargin
  // times the head's remaining GPU-time.
  void schedule_checkpoint_tick(std::uint32_t h) {
    if (!windowed_preemption(o)) return;
    const Job& head_job = jobs[h];
    double threshold = 0;
    if (!o.clairvoyant) {
      const auto q = pending_queue(head_job.attained, head_job.waited + now - head_job.eligible,
                                   head_job.hold, o.priority);
      if (q >= o.priority.queues.size()) return;  // the last queue preempts no one
      threshold = o.priority.queues[q];
    }
    double t = kInf;
    for (const auto r : running) {
      const Job& v = jobs[r];
      if (!v.t.checkpointable) continue;
      double crossed = now;
      double until = kInf;
      if (o.clairvoyant) {
        const double spare =
            remaining_gpu_s(v, progress_now(v)) - kClairvoyantMargin * remaining_gpu_s(head_job);
        if (spare < 0) continue;
        until = std::max(now, v.run_start + v.run_restore) + spare / v.hold;
      } else {
        const double attained = v.attained + v.hold * (now - v.run_start);
        crossed += std::max(0.0, threshold - attained) / v.hold;
      }
      // Its first window (k x ckpt_every of run time) at or after that.
      const double base = v.run_start;
      const double k = std::max(1.0, std::ceil((crossed - base) / o.ckpt_every_s - 1e-9));
      double at = base + k * o.ckpt_every_s + rule_lag();
      if (just_checkpointed(rule_run_time(v), o.ckpt_every_s, checkpoint_slack()) &&
          crossed <= now + kEps) {
        at = now;
      }
      if (at > now + kEps && at <= until) t = std::min(t, at);
    }
    if (t < tick_at) {
      tick_at = t;
      events.push({t, Kind::tick, kNoJob, 0});
    }
  }

  // Placement for job j now, off the nodes `off` (reserved for a higher job).
  std::vector<Alloc> place_off(const Job& j, const std::vector<std::uint32_t>& off) const {
    if (off.empty()) return place(j);
    if (free_total < j.hold) return {};
    scratch = free;
    for (const auto k : off) scratch[k] = 0;
    if (o.policy == Policy::fifo_backfill) return place_fifo(scratch, j.hold);
    auto alloc = place_dl(scratch, j.nodes, j.per_node, leaf_of, leaves);
    if (alloc.empty()) alloc = place_other_shapes(scratch, j);
    return alloc;
  }

  // The simulation as the backfill passes see it.
  class Host final : public BackfillHost {
   public:
    explicit Host(Impl& sim) : sim_(sim) {}
    double now() const override { return sim_.now; }
    const std::vector<Job>& jobs() const override { return sim_.jobs; }
    const std::vector<std::uint32_t>& running() const override { return sim_.running; }
    const std::vector<std::uint32_t>& free() const override { return sim_.free; }
    std::int64_t free_total() const override { return sim_.free_total; }
    std::vector<Alloc> place(std::uint32_t i,
                             const std::vector<std::uint32_t>& off) const override {
      return sim_.place_off(sim_.jobs[i], off);
    }
    void start(std::uint32_t i, const std::vector<Alloc>& alloc,
               std::optional<double> slot_end) override {
      sim_.start(i, alloc, slot_end);
    }
    std::vector<std::uint32_t> victim_candidates(std::uint32_t i) const override {
      return sim_.victim_candidates(sim_.jobs[i]);
    }
    Decision preempt_for(std::uint32_t i, const std::vector<char>& off) const override {
      return sim_.preempt_for(i, &off);
    }
    void preempt(std::uint32_t i) override { sim_.preempt(i); }

   private:
    Impl& sim_;
  };

  void backfill_pass() {
    backfill_useful = false;
    Host host(*this);
    sim::backfill_pass(host, o, backfill_order());
  }

  void queue_backfill() {
    if (backfill_queued || queue.empty()) return;
    if (!backfill_preempts(o) && (!backfill_useful || free_total == 0)) return;
    const double at = (std::floor(now / o.bf_interval_s) + 1) * o.bf_interval_s;
    events.push({at, Kind::backfill, kNoJob, 0});
    backfill_queued = true;
  }

  // ---------------------------------------------------------------- the loop
  double next_event_time() const {
    double t = kInf;
    if (next_arrival < jobs.size()) t = jobs[next_arrival].t.submit_s;
    if (!events.empty()) t = std::min(t, events.top().t);
    return t;
  }

  void run_until(double until) {
    while (done < jobs.size()) {
      const double t = next_event_time();
      if (t == kInf) throw std::logic_error("dl-sim: pending jobs but nothing left to happen");
      if (t > until) break;
      usage.account(t, free_total, most_free_on_a_node());  // the state since the last event
      now = std::max(now, t);
      bool backfill = false;
      while (next_arrival < jobs.size() && jobs[next_arrival].t.submit_s <= now) {
        enqueue(static_cast<std::uint32_t>(next_arrival++));
      }
      while (!events.empty() && events.top().t <= now) {
        const Event e = events.top();
        events.pop();
        if (e.kind == Kind::backfill) {
          backfill = true;
          backfill_queued = false;
          continue;
        }
        Job& j = jobs[e.job];
        if (e.kind == Kind::reshape) {
          reshape_pass();
          // While anything can still change; else the loop ends as it would without.
          if (next_arrival < jobs.size() || !running.empty()) {
            events.push(
                {now + static_cast<double>(o.priority.interval.count()), Kind::reshape, kNoJob, 0});
          }
          continue;
        }
        if (e.kind == Kind::tick) {
          if (e.t == tick_at) tick_at = kInf;
          ++version;  // the main pass tries preemption again
          continue;
        }
        if (e.kind == Kind::promote) {
          if (j.state == State::pending && j.epoch == e.epoch) promote(e.job);
          continue;
        }
        if (e.kind == Kind::eligible) {
          if (j.state == State::requeued && j.epoch == e.epoch) {
            record(e.job, "eligible");
            enqueue(e.job);
          }
          continue;
        }
        if (j.state != State::running || j.epoch != e.epoch) continue;
        if (now + kEps >= j.completion) {
          finish(e.job);
        } else {
          stop_at_deadline(e.job);
        }
      }
      main_pass();
      if (backfill) backfill_pass();
      queue_backfill();
    }
    if (until != kInf) now = std::max(now, until);
  }

  Result result() const {
    std::vector<JobOutcome> outcomes;
    std::uint64_t split = 0;
    for (const auto& j : jobs) {
      outcomes.push_back({j.t.id, j.t.name.empty() ? std::to_string(j.t.id) : j.t.name,
                          j.t.submit_s, j.first_start, j.finish});
      split += j.split;
    }
    Result r =
        summarize(std::move(outcomes), usage, static_cast<double>(o.nodes) * o.gpus_per_node);
    r.split_small_jobs = split;
    r.preemptions = preemptions;
    r.reshapes = reshapes;
    r.lost_gpu_s = lost_gpu_s;
    r.runs = runs;
    return r;
  }
};

Simulator::Simulator(std::vector<TraceJob> trace, const Options& options)
    : impl_(std::make_unique<Impl>(std::move(trace), options)) {}

Simulator::~Simulator() = default;

Result Simulator::run() {
  impl_->run_until(kInf);
  return impl_->result();
}

void Simulator::run_until(double t) { impl_->run_until(t); }

Simulator::Decision Simulator::decide() const {
  auto d = impl_->decide(true);
  if (d.job) d.job = impl_->jobs[*d.job].t.id;
  for (auto& v : d.victims) v = impl_->jobs[v].t.id;
  return d;
}

std::size_t Simulator::pending() const { return impl_->queue.size(); }

std::size_t Simulator::running() const { return impl_->running.size(); }

std::vector<std::uint32_t> Simulator::Impl::backfill_order() const {
  std::vector<std::uint32_t> order;
  for (auto it = queue.begin(); it != queue.end() && order.size() < o.bf_depth; ++it) {
    order.push_back(it->second);
  }
  return order;
}

}  // namespace dl::sim
