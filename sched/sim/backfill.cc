#include "sched/sim/backfill.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <tuple>

namespace dl::sim {
namespace {

double slot_up(double now, double resolution, double t) {
  return t <= now ? now : now + std::ceil((t - now) / resolution - 1e-9) * resolution;
}

// reach[k]: the longest limit among the jobs from the k-th on that fit in the free GPUs
// now; a reservation beginning later cannot change what a pass starts.
std::vector<double> reach_of(const std::vector<Job>& jobs, const std::vector<std::uint32_t>& order,
                             std::int64_t free_total) {
  std::vector<double> reach(order.size() + 1, 0);
  for (std::size_t k = order.size(); k-- > 0;) {
    const Job& j = jobs[order[k]];
    reach[k] = std::max(reach[k + 1], j.hold <= free_total ? j.limit : 0.0);
  }
  return reach;
}

// The nodes the highest job that has to wait will start on, and when, from the time
// limits of the running jobs. Slurm's backfill reserves specific nodes for it, so a
// lower job may use them only if it ends before then; without this a gang of whole
// nodes could wait forever behind small jobs that keep a GPU of every node busy.
struct NodeReservation {
  double start = kInf;
  std::vector<std::uint32_t> nodes;
};

NodeReservation reserve_nodes(const BackfillHost& host, const Options& o, const Job& j) {
  const double now = host.now();
  const std::vector<Job>& jobs = host.jobs();
  std::vector<std::tuple<double, std::uint32_t, std::uint32_t>> releases;
  for (const auto r : host.running()) {
    for (const auto& a : jobs[r].alloc) {
      releases.emplace_back(std::max(jobs[r].est_end, now), a.node, a.gpus);
    }
  }
  std::sort(releases.begin(), releases.end());
  std::vector<std::uint32_t> level = host.free();
  NodeReservation res;
  const std::uint32_t need = o.policy == Policy::fifo_backfill ? 1 : j.per_node;
  std::uint64_t have = 0;  // fifo: GPUs on the chosen nodes; dl: nodes that qualify
  const auto enough = [&] {
    return have >= (o.policy == Policy::fifo_backfill ? j.hold : j.nodes);
  };
  const auto consider = [&](std::uint32_t k, std::uint32_t before) {
    if (o.policy == Policy::fifo_backfill) {
      if (before == 0) res.nodes.push_back(k);
      have += level[k] - before;
    } else if (before < need && level[k] >= need) {
      res.nodes.push_back(k);
      ++have;
    }
  };
  for (std::uint32_t k = 0; k < o.nodes && !enough(); ++k) consider(k, 0);
  res.start = now;
  for (const auto& [t, k, g] : releases) {
    if (enough()) break;
    const std::uint32_t before = level[k];
    level[k] += g;
    consider(k, before);
    res.start = t;
  }
  if (!enough()) res.start = kInf;
  if (o.policy == Policy::dl) res.nodes.resize(std::min<std::size_t>(res.nodes.size(), j.nodes));
  return res;
}

// dl-sim's own model of Slurm's backfill (the dl policy with best-fit shapes): every
// pending job (up to bf_depth, best first) either starts now without delaying any
// higher job's reservation, or gets a reservation at its earliest start within
// bf_window: in GPUs over time for every job, and on specific nodes for the highest one.
void own_backfill_pass(BackfillHost& host, const Options& o,
                       const std::vector<std::uint32_t>& order) {
  const double now = host.now();
  const std::vector<Job>& jobs = host.jobs();
  std::vector<std::pair<double, std::int64_t>> releases;
  releases.reserve(host.running().size());
  for (const auto r : host.running()) {
    releases.emplace_back(std::max(jobs[r].est_end, now + 1), jobs[r].hold);
  }
  Profile profile(now, o.bf_resolution_s, host.free_total(), std::move(releases));
  // A reservation only matters to lower jobs that could start now, and only if it
  // begins within their run: jobs after the k-th that fit in the free GPUs run at
  // most `reach[k + 1]` seconds. Reservations that begin later (or all of them,
  // once no lower job fits) cannot change what this pass starts, so they are not
  // searched for.
  const auto need_of = [&](const Job& j) { return j.time_min.value_or(j.limit); };
  const std::vector<double> reach = reach_of(jobs, order, host.free_total());
  std::optional<NodeReservation> top;
  const std::vector<std::uint32_t> none;
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (reach[k] == 0 || host.free_total() == 0) return;
    const std::uint32_t i = order[k];
    const Job& j = jobs[i];
    const double need = need_of(j);
    const double horizon = now + std::min(o.bf_window_s, reach[k + 1]);
    double s = profile.earliest(j.hold, need, now, horizon);
    bool shape_blocked = false;
    if (s <= now + kEps) {
      std::optional<double> slot;
      if (j.time_min) {
        const double hole = profile.window_end(j.hold, now);
        if (hole < now + j.limit) slot = hole;
      }
      const double end = slot.value_or(now + j.limit);
      // Off the reserved nodes if it runs into their reservation.
      const auto alloc = host.place(i, top && end > top->start ? top->nodes : none);
      if (!alloc.empty()) {
        profile.occupy(now, end, j.hold);
        host.start(i, alloc, slot);
        continue;
      }
      // Enough GPUs in total but not in the shape. The GPU totals cannot say when
      // the shape fits; reserving them from the next second on would be a "phantom"
      // reservation that keeps every lower job out of GPUs no one takes. The
      // highest such job gets its nodes' reservation (below), the others none.
      shape_blocked = true;
    }
    if (!top) {
      top = reserve_nodes(host, o, j);
      top->start = slot_up(now, o.bf_resolution_s, top->start);
      if (shape_blocked) s = top->start;
    } else if (shape_blocked) {
      continue;
    }
    // Slurm reserves a job with a time_min for its time_min (backfill.c).
    if (s < horizon) profile.occupy(s, s + need, j.hold);
  }
}

// Slurm 22.05's backfill pass for plain Slurm (plugins/sched/backfill/backfill.c):
// jobs in priority order, up to bf_depth. Each gets the earliest start at which
// select/cons_tres can place it: running jobs release their GPUs at their time
// limits, and the nodes reserved for higher jobs in this pass (the node-space map,
// whole nodes) are off limits for any window that overlaps theirs. A job that can
// start now starts; one that can start within bf_window reserves the nodes of that
// placement from its start to its end, both rounded down to bf_resolution; one
// that cannot gets no reservation. Running jobs on shared nodes are not in the map
// (_bf_reserve_running only reserves whole-node jobs).
void slurm_backfill_pass(BackfillHost& host, const Options& o,
                         const std::vector<std::uint32_t>& order) {
  const double now = host.now();
  const std::vector<Job>& jobs = host.jobs();
  const bool dl = o.policy == Policy::dl;
  struct Release {
    double t;
    std::uint32_t node, gpus;
  };
  std::vector<Release> releases;
  // The dl policy: preempt/dl's victim candidates for the job being tested (sorted).
  // The will-run test removes them from its map before anything else (_build_cr_job_list):
  // a job that cannot start now even by preempting them is expected, and reserved,
  // as if they were gone, not at their time limits.
  std::vector<std::uint32_t> gone;
  // cons_tres' will-run test (_will_run_test in select/cons_common/job_test.c) frees
  // the running jobs in batches, those that end within a time window of the first
  // (30 s, aligned to it, doubled after each batch), and reports a start at the last
  // freed job's end: a job that needs only the first of several jobs ending close
  // together is expected to start at the last one's end.
  const auto collect_releases = [&] {
    releases.clear();
    for (const auto r : host.running()) {
      if (std::binary_search(gone.begin(), gone.end(), r)) continue;
      for (const auto& a : jobs[r].alloc) {
        releases.push_back({std::max(jobs[r].est_end, now), a.node, a.gpus});
      }
    }
    std::sort(releases.begin(), releases.end(),
              [](const Release& x, const Release& y) { return x.t < y.t; });
    double window = 30;
    // Aligned on the controller's clock (end_time % 30).
    const double end_time =
        releases.empty()
            ? 0
            : releases[0].t + (window - std::fmod(releases[0].t + o.clock_offset_s, window));
    for (std::size_t k = 0, n = releases.size(); k < n;) {
      std::size_t e = k + 1;
      while (e < n && releases[e].t <= end_time + window) ++e;
      for (std::size_t p = k; p < e; ++p) releases[p].t = releases[e - 1].t;
      do {
        window *= 2;
      } while (e < n && releases[e].t > end_time + window);
      k = e;
    }
  };
  collect_releases();
  // As in own_backfill_pass(): reservations that begin after every lower job that could
  // start now would end cannot change what this pass starts. (Not when the pass
  // preempts: a job may start by preempting with no GPUs free.)
  const bool shortcuts = !backfill_preempts(o);
  const auto need_of = [&](const Job& j) { return j.time_min.value_or(j.limit); };
  const std::vector<double> reach = reach_of(jobs, order, host.free_total());
  struct Resv {
    double begin, end;
    std::vector<std::uint32_t> nodes;
  };
  std::vector<Resv> resv;
  // Rounded down on the controller's clock.
  const auto floor_res = [&](double t) {
    return std::floor((t + o.clock_offset_s) / o.bf_resolution_s + 1e-9) * o.bf_resolution_s -
           o.clock_offset_s;
  };
  std::vector<std::uint32_t> level(o.nodes), masked(o.nodes, 0), avail(o.nodes);
  std::vector<char> off(o.nodes, 0);
  // GPUs of victims preempted in this pass for a job that has not started yet.
  std::vector<std::uint32_t> held(o.nodes, 0);
  std::uint32_t stamp = 0;
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (shortcuts && (reach[k] == 0 || host.free_total() == 0)) return;
    const std::uint32_t i = order[k];
    const Job& j = jobs[i];
    if (j.state != State::pending) continue;
    if (dl && backfill_preempts(o)) {
      std::vector<std::uint32_t> candidates = host.victim_candidates(i);
      std::sort(candidates.begin(), candidates.end());
      if (candidates != gone) {
        gone = std::move(candidates);
        collect_releases();
      }
    }
    const double need = need_of(j);
    const double last = now + (shortcuts ? std::min(o.bf_window_s, reach[k + 1] + o.bf_resolution_s)
                                         : o.bf_window_s);
    std::vector<double> times;
    times.push_back(now);
    for (const auto& r : resv) {
      if (r.end > now && r.end <= last) times.push_back(r.end);
    }
    std::sort(times.begin(), times.end());
    level = host.free();
    std::int64_t total = host.free_total();
    for (std::uint32_t node = 0; node < o.nodes; ++node) {
      level[node] -= held[node];
      total -= held[node];
    }
    std::size_t next_release = 0, next_time = 0;
    double at = kInf;
    std::vector<Alloc> alloc;
    bool preempted = false;
    bool later = false;
    while (true) {
      // The next candidate start: a release or the end of a reservation.
      double c = next_time < times.size() ? times[next_time] : kInf;
      if (next_release < releases.size()) c = std::min(c, releases[next_release].t);
      if (c > last || c == kInf) break;
      if (!later && c > now) {
        // Now is tested below by preempting them; later starts count them gone, and
        // the GPUs held for a preemptor free.
        for (const auto g : gone) {
          for (const auto& a : jobs[g].alloc) level[a.node] += a.gpus;
          total += jobs[g].hold;
        }
        for (std::uint32_t node = 0; node < o.nodes; ++node) {
          level[node] += held[node];
          total += held[node];
        }
        later = true;
      }
      while (next_release < releases.size() && releases[next_release].t <= c) {
        level[releases[next_release].node] += releases[next_release].gpus;
        total += releases[next_release].gpus;
        ++next_release;
      }
      while (next_time < times.size() && times[next_time] <= c) ++next_time;
      if (total < j.hold && !(dl && c <= now && backfill_preempts(o))) continue;
      ++stamp;
      std::int64_t usable = total;
      for (const auto& r : resv) {
        if (!(c < r.end && c + need > r.begin)) continue;
        for (const auto node : r.nodes) {
          if (masked[node] == stamp) continue;
          masked[node] = stamp;
          usable -= level[node];
        }
      }
      if (!dl) {
        if (usable >= j.hold) {
          at = c;
          break;
        }
        continue;
      }
      // A dl shape: nodes x GPUs per node, placed as select/cons_tres places it on
      // the nodes no overlapping reservation holds.
      for (std::uint32_t node = 0; node < o.nodes; ++node) {
        avail[node] = masked[node] == stamp ? 0 : level[node];
      }
      if (usable >= j.hold) alloc = place_dl_cons_tres(avail, j.nodes, j.per_node);
      if (!alloc.empty()) {
        at = c;
        break;
      }
      if (c <= now && backfill_preempts(o)) {
        // The will-run test with the preemptable jobs gone (preempt/dl's candidates):
        // a start now, and Slurm preempts them for it (on nodes no higher job's
        // reservation holds).
        for (std::uint32_t node = 0; node < o.nodes; ++node) {
          off[node] = masked[node] == stamp || held[node] > 0;
        }
        const Simulator::Decision d = host.preempt_for(i, off);
        if (!d.victims.empty() && !d.alloc.empty()) {
          for (const auto v : d.victims) {
            for (const auto& a : jobs[v].alloc) held[a.node] += a.gpus;
            host.preempt(static_cast<std::uint32_t>(v));
          }
          // Slurm's start fails while the victims are being requeued ("Requested nodes
          // are busy"); the main scheduler, which runs right after the requeue, starts
          // the preemptor only if no higher job waits (it stops at the first that
          // cannot start), else the next backfill pass does. Until then no lower job
          // of this pass gets the victims' GPUs.
          bool head = true;
          for (std::size_t h = 0; h < k && head; ++h) {
            head = jobs[order[h]].state != State::pending;
          }
          if (head) {
            std::vector<Alloc> got;
            for (const auto& [node, gpus] : d.alloc) got.push_back({node, gpus});
            host.start(i, got, std::nullopt);
            for (const auto& a : jobs[i].alloc) held[a.node] -= std::min(held[a.node], a.gpus);
          }
          collect_releases();
          preempted = true;
          break;
        }
      }
    }
    if (preempted || at == kInf) continue;
    if (!dl) {
      for (std::uint32_t node = 0; node < o.nodes; ++node) {
        if (masked[node] == stamp) level[node] = 0;
      }
      alloc = place_fifo(level, j.hold);
    }
    if (alloc.empty()) throw std::logic_error("dl-sim: backfill found no placement");
    if (at <= now) {
      host.start(i, alloc, std::nullopt);
      // The will-run tests of the jobs after it see it run until its time limit.
      collect_releases();
      continue;
    }
    Resv r{floor_res(at), floor_res(at + need), {}};
    for (const auto& a : alloc) r.nodes.push_back(a.node);
    resv.push_back(std::move(r));
  }
}

}  // namespace

Profile::Profile(double now, double resolution, std::int64_t free_now,
                 std::vector<std::pair<double, std::int64_t>> releases)
    : now_(now), res_(resolution) {
  for (auto& r : releases) r.first = round_up(r.first);
  std::sort(releases.begin(), releases.end());
  times_.push_back(now);
  free_.push_back(free_now);
  for (const auto& [t, g] : releases) {
    if (t <= times_.back()) {
      free_.back() += g;
    } else {
      times_.push_back(t);
      free_.push_back(free_.back() + g);
    }
  }
}

double Profile::earliest(std::int64_t g, double d, double from, double before) const {
  const std::size_t n = times_.size();
  std::size_t j = step_at(from);
  double start = from;
  while (true) {
    while (free_[j] < g) {
      if (++j == n || times_[j] >= before) return kInf;
      start = times_[j];
    }
    const double end = start + d;
    while (true) {
      if (j + 1 == n || times_[j + 1] >= end) return start;
      if (free_[++j] < g) break;
    }
  }
}

double Profile::window_end(std::int64_t g, double from) const {
  for (std::size_t j = step_at(from); j < times_.size(); ++j) {
    if (free_[j] < g) return std::max(times_[j], from);
  }
  return kInf;
}

void Profile::occupy(double s, double e, std::int64_t g) {
  const std::size_t a = split_at(round_down(s));
  const std::size_t b = e == kInf ? times_.size() : split_at(round_up(e));
  for (std::size_t k = a; k < b; ++k) free_[k] -= g;
}

double Profile::round_up(double t) const { return slot_up(now_, res_, t); }

double Profile::round_down(double t) const {
  return t <= now_ ? now_ : now_ + std::floor((t - now_) / res_ + 1e-9) * res_;
}

std::size_t Profile::step_at(double t) const {
  const auto it = std::upper_bound(times_.begin(), times_.end(), t);
  return static_cast<std::size_t>(std::max<std::ptrdiff_t>(it - times_.begin() - 1, 0));
}

std::size_t Profile::split_at(double t) {
  const std::size_t i = step_at(t);
  if (times_[i] == t) return i;
  times_.insert(times_.begin() + static_cast<std::ptrdiff_t>(i) + 1, t);
  free_.insert(free_.begin() + static_cast<std::ptrdiff_t>(i) + 1, free_[i]);
  return i + 1;
}

bool slurm_backfill(const Options& o) {
  return o.policy == Policy::fifo_backfill || cons_tres_placement(o.shapes);
}

bool backfill_preempts(const Options& o) {
  return windowed_preemption(o) && cons_tres_placement(o.shapes);
}

void backfill_pass(BackfillHost& host, const Options& o, const std::vector<std::uint32_t>& order) {
  if (slurm_backfill(o)) {
    slurm_backfill_pass(host, o, order);
  } else {
    own_backfill_pass(host, o, order);
  }
}

}  // namespace dl::sim
