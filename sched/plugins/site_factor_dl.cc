// site_factor/dl: the job's site factor is the DL priority of sched/priority.h (least
// attained GPU service, with aging), which needs no run-time estimate from users.
// Slurm forgets a job's earlier runs and waits when it requeues it, so a thread
// samples every job each `interval` into a ledger (saved in StateSaveLocation) and,
// because slurmctld refreshes priorities by itself only with slurmdbd, recomputes
// the priority of every pending job. With reshape=yes it also gives a pending even gang
// that cannot start in its split another even split that can. See dl-sched(8).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "config.h"
#include "core/error.h"
#include "sched/gang.h"
#include "sched/ledger.h"
#include "sched/plugins/controller.h"
#include "sched/plugins/guard.h"
#include "sched/priority.h"
#include "sched/spank_env.h"
#include "sched/state_file.h"
#include "sched/tres.h"

namespace dl::sched {
namespace {

// The ledger is only touched with slurmctld's job lock held (by the hooks' callers or
// by the sampler); `mutex` orders the sampler against hooks running in other threads
// that hold only a read lock. Lock order: slurmctld's locks, then `mutex`.
struct Plugin {
  std::mutex mutex;
  ServiceLedger ledger;
  PriorityParams params;
  std::string state_path;
  std::string saved;  // what the state file holds
  // ledger.finished().added() when the thresholds were last taken: until another job
  // finishes they stay as they are.
  std::uint64_t adapted = 0;

  // DL_SITE_FACTOR_BASELINE in slurmctld's environment (bench/sched/lock_hold): every
  // other sample is then Slurm's own refresh alone, the benchmark's baseline.
  bool baselines = false;

  std::mutex stop_mutex;
  std::condition_variable stop_cv;
  bool stopping = false;
  std::thread sampler;
};

// Never destroyed: slurmctld may exit without calling fini, and destroying a joinable
// std::thread calls std::terminate. fini stops and joins the sampler.
Plugin& plugin() {
  static Plugin* p = new Plugin;
  return *p;
}

// The work a DL job does (sched/ledger.h): its owner, its checkpoint directory (the job
// key of its default one, which slurmstepd makes <root>/<user>/<key>) and what it
// resumes from. nullopt for any other job, found without allocating.
std::optional<Work> work_of(const job_record_t* job) {
  if (!spank_env_has_spec(job->spank_job_env, job->spank_job_env_size)) return std::nullopt;
  std::optional<Spec> spec;
  try {
    spec = spec_of(job);
  } catch (const InputError&) {
    return std::nullopt;  // job_submit/dl lets no such spec through
  }
  if (!spec) return std::nullopt;
  Work w;
  w.uid = job->user_id;
  if (!spec->ckpt_dir.empty()) {
    w.own = spec->ckpt_dir;
  } else {
    const bool array = job->array_job_id != 0 && job->array_task_id != NO_VAL;
    w.own = ckpt_job_key(job->job_id, array ? std::optional(job->array_job_id) : std::nullopt,
                         array ? std::optional(job->array_task_id) : std::nullopt);
  }
  w.resume = spec->resume_from;
  return w;
}

CarryParams carry_params(const PriorityParams& params) {
  CarryParams c;
  c.half_life_s = static_cast<double>(params.carry_half_life.count());
  // A hundredth of a level step: what is left of a carried account below that moves no
  // job's priority.
  c.floor_gpu_s = static_cast<double>(params.service_unit.count()) / 100;
  return c;
}

Service observe(ServiceLedger& ledger, const job_record_t* job, std::time_t now) {
  JobSnapshot s;
  s.running = IS_JOB_RUNNING(job);
  s.pending = IS_JOB_PENDING(job);
  s.completing = IS_JOB_COMPLETING(job);
  s.finished = IS_JOB_FINISHED(job);
  s.held = job->priority == 0 || !job->details;
  s.requeued = job->restart_cnt > 0;
  s.start = job->start_time;
  if (job->details) {
    s.submit = job->details->submit_time;
    s.begin = job->details->begin_time;
    s.accrue = job->details->accrue_time;
  }
  s.end = job->end_time;
  s.gpus = s.running || s.finished ? allocated_gpus(job) : 0;
  s.uid = job->user_id;
  const WorkOf work = [job] { return work_of(job); };
  return ledger.observe(job->job_id, s, now, &work);
}

// Observes the job and gives it its site factor. Caller holds `mutex`.
void score(Plugin& p, job_record_t* job, std::time_t now) {
  const Service service = observe(p.ledger, job, now);
  job->site_factor =
      NICE_OFFSET + site_factor(service.attained, service.waited, p.params, service.gpus);
}

// queues=pNN: the thresholds from the jobs finished so far, taken again when a job has
// finished since, logged when they change (verbose) and, with `announce` (start,
// reconfigure: the ledger or the percentiles may be new), always. Caller holds `mutex`.
void adapt_queues(Plugin& p, bool announce = false) {
  if (p.params.queue_percentiles.empty()) return;
  const auto& finished = p.ledger.finished();
  if (finished.added() == p.adapted && !announce) return;
  p.adapted = finished.added();
  auto queues = adapted_queues(finished, p.params);
  if (queues == p.params.queues && !announce) return;
  p.params.queues = std::move(queues);
  std::string line;
  if (finished.size() < kAdaptMinJobs) {
    line = fmt::format("not yet set: {} of {} jobs have finished", finished.size(), kAdaptMinJobs);
  } else {
    for (std::size_t i = 0; i < p.params.queues.size(); ++i) {
      line += fmt::format("{}p{:g} {:.3g}", i ? ", " : "", p.params.queue_percentiles[i],
                          p.params.queues[i] / 3600);
    }
    line += fmt::format(" GPU-hours, from the last {} finished jobs of {} user{}", finished.size(),
                        finished.users(), finished.users() == 1 ? "" : "s");
  }
  if (announce) {
    info("dl: site_factor: queue thresholds %s", line.c_str());
  } else {
    verbose("dl: site_factor: queue thresholds %s", line.c_str());
  }
}

void load_state(Plugin& p) {
  p.state_path = std::string(slurm_conf.state_save_location) + "/site_factor_dl.state";
  const auto loaded = load_newest_good(
      p.state_path, [](const std::string& text) { ServiceLedger::parse(text); },
      [](const std::string& path, const std::string& why) {
        error("dl: site_factor: couldn't restore %s: %s", path.c_str(), why.c_str());
      });
  if (!loaded) return;
  p.ledger = ServiceLedger::parse(loaded->text);
  p.ledger.set_carry(carry_params(p.params));
  p.saved = loaded->text;
  info("dl: site_factor: service of %zu jobs restored from %s", p.ledger.size(),
       loaded->path.c_str());
}

using Clock = std::chrono::steady_clock;
using Ms = std::chrono::duration<double, std::milli>;

// Set on the sampler's thread while it has Slurm recompute pending jobs' priorities: each
// job was scored just before, so site_factor_p_set, which Slurm's set_job_prio calls,
// leaves it alone.
thread_local bool sweeping = false;

// `sweeping` for the life of one pass over the job list.
struct Sweeping {
  Sweeping() { sweeping = true; }
  ~Sweeping() { sweeping = false; }
  Sweeping(const Sweeping&) = delete;
  Sweeping& operator=(const Sweeping&) = delete;
};

// Slurm's priority of a pending job, as its own refresh sets it; false for a job whose
// priority Slurm leaves alone (not pending, held, or set by an administrator).
bool refresh_priority(job_record_t* job) {
  if (!IS_JOB_PENDING(job) || job->priority == 0 || job->direct_set_prio) return false;
  set_job_prio(job);
  return true;
}

// ---- reshape=yes: another even split for a pending gang that cannot start in its own

// A pending job waiting only for resources or for higher jobs, which Slurm's main
// scheduler would try now, in one partition (jobs with more are left alone).
bool waits_to_start(const job_record_t* job) {
  return IS_JOB_PENDING(job) && job->priority != 0 && job->details && job->part_ptr &&
         job->part_ptr->node_bitmap && !job->part_ptr_list &&
         (job->state_reason == WAIT_NO_REASON || job->state_reason == WAIT_PRIORITY ||
          job->state_reason == WAIT_RESOURCES);
}

// The job's shape now: its nodes and the GPUs it asks for on each.
Shape shape_of(const job_record_t* job) {
  Shape s;
  s.nodes_min = s.nodes_max = std::max<std::uint32_t>(job->details->min_nodes, 1);
  s.gpus_per_node = requested_gpus_per_node(job);
  return s;
}

std::uint32_t cpus_per_gpu(const job_record_t* job) {
  const std::uint16_t c = job->details->cpus_per_task;
  return c == 0 || c == NO_VAL16 ? 1 : c;
}

// The GPUs and preemptibility of a pending even gang site_factor/dl may reshape
// (reshape_note), else nullopt.
struct Reshapable {
  std::uint32_t gpus = 0;
  bool preemptible = false;
};

std::optional<Reshapable> reshapable(const job_record_t* job, const Shape& shape) {
  // An array's pending record stands for many tasks, a heterogeneous job's component for
  // one part of it: update_job would change them all.
  if (!job->comment || job->array_recs || job->het_job_id != 0) return std::nullopt;
  std::optional<Spec> spec;
  try {
    spec = spec_of(job);
  } catch (const InputError&) {
    return std::nullopt;
  }
  if (!spec || !spec->gpus || spec->placement != Placement::even || spec->elastic) {
    return std::nullopt;
  }
  if (!reshape_note(job->comment, *spec->gpus, spec->preemptible, shape)) return std::nullopt;
  return Reshapable{*spec->gpus, spec->preemptible};
}

// One reshape, decided under the sweep's locks and carried out after them.
struct Reshape {
  std::uint32_t job_id = 0;
  Shape from, to;
  std::string comment;
  std::string tres_per_node;
};

// A waiting job and its place in Slurm's order (the partition's PriorityTier, then the
// job's priority, then the older job), read while the sweep has its record in the cache.
struct Waiting {
  std::uint16_t tier = 0;
  std::uint32_t priority = 0;
  std::uint32_t job_id = 0;
  job_record_t* job = nullptr;

  static Waiting of(job_record_t* job) {
    return {job->part_ptr->priority_tier, job->priority, job->job_id, job};
  }
  // Heap order: the job Slurm tries first on top.
  bool operator<(const Waiting& o) const {
    if (tier != o.tier) return tier < o.tier;
    return priority != o.priority ? priority < o.priority : job_id > o.job_id;
  }
};

// A pass of Slurm's schedulers as site_factor/dl sees it (ReshapePass): the waiting
// jobs in priority order, each started where it fits (in another even split when its own
// does not and it is reshapable). Caller holds slurmctld's job and node locks. `looked`
// is how many waiting jobs it took off the heap.
std::vector<Reshape> plan_reshapes(std::vector<Waiting> waiting, std::size_t& looked) {
  // The partitions jobs wait in.
  std::vector<const part_record_t*> waited_in;
  const std::vector<FreeNode> free = free_nodes();
  std::vector<ReshapePass::Partition> partitions;
  for (const Waiting& w : waiting) {
    const part_record_t* part = w.job->part_ptr;
    if (std::find(waited_in.begin(), waited_in.end(), part) != waited_in.end()) continue;
    waited_in.push_back(part);
    ReshapePass::Partition p;
    for (std::size_t n = 0; n < free.size(); ++n) {
      if (bit_test(part->node_bitmap, static_cast<bitoff_t>(n))) p.nodes.push_back(n);
    }
    p.gpus_per_node = capacity_of(part).gpus_per_node();
    partitions.push_back(std::move(p));
  }
  ReshapePass pass(free, std::move(partitions));
  // A heap, not a sort: the pass looks at the first kLooked of what may be many more.
  std::make_heap(waiting.begin(), waiting.end());
  std::vector<Reshape> out;
  // As bf_max_job_test bounds the backfill pass: the first jobs only.
  constexpr std::size_t kLooked = 1000;
  for (looked = 0; !waiting.empty() && looked < kLooked; ++looked) {
    std::pop_heap(waiting.begin(), waiting.end());
    job_record_t* job = waiting.back().job;
    waiting.pop_back();
    const auto part = static_cast<std::size_t>(
        std::find(waited_in.begin(), waited_in.end(), job->part_ptr) - waited_in.begin());
    const Shape shape = shape_of(job);
    std::optional<Reshapable> r;
    const auto other = pass.next({part, shape, cpus_per_gpu(job)}, [&] {
      r = reshapable(job, shape);
      return r ? std::optional<std::uint32_t>(r->gpus) : std::nullopt;
    });
    if (!other) continue;
    std::string tres = fmt::format("{}:{}", kGpuTres, other->gpus_per_node);
    if (const auto rest = without_gpus(job->tres_per_node ? job->tres_per_node : "");
        !rest.empty()) {
      tres += "," + rest;
    }
    out.push_back({job->job_id, shape, *other,
                   reshaped_comment(job->comment, r->gpus, r->preemptible, shape, *other),
                   std::move(tres)});
  }
  return out;
}

// Whether the job's association and QOS limits let it run in `to`'s nodes and CPUs now,
// as Slurm's scheduler checks a job it has found nodes for
// (acct_policy_job_runnable_post_select, here with the TRES counts of the new shape);
// `reason` says which limit when not. That check records its verdict in the job, which
// keeps its own: its state reason is put back.
bool limits_allow(job_record_t* job, const Shape& to, std::uint32_t cpus, std::string& reason) {
  std::vector<std::uint64_t> tres(job->tres_req_cnt, job->tres_req_cnt + slurmctld_tres_cnt);
  const std::uint64_t old_nodes = tres[TRES_ARRAY_NODE];
  tres[TRES_ARRAY_NODE] = to.nodes_min;
  tres[TRES_ARRAY_CPU] = std::uint64_t{to.nodes_min} * to.gpus_per_node * cpus;
  // Memory per node scales with the nodes; per CPU, with the CPUs.
  const std::uint64_t mem = job->details->pn_min_memory;
  if (mem & MEM_PER_CPU) {
    tres[TRES_ARRAY_MEM] = (mem & ~MEM_PER_CPU) * tres[TRES_ARRAY_CPU];
  } else if (old_nodes > 0) {
    tres[TRES_ARRAY_MEM] = tres[TRES_ARRAY_MEM] / old_nodes * to.nodes_min;
  }
  const auto state_reason = job->state_reason;
  const std::string state_desc = job->state_desc ? job->state_desc : "";
  const bool had_desc = job->state_desc != nullptr;
  auto* const blocking = job->qos_blocking_ptr;
  const bool ok = acct_policy_job_runnable_post_select(job, tres.data(), false);
  if (!ok) reason = reason_name(static_cast<job_state_reason>(job->state_reason));
  job->state_reason = state_reason;
  xfree(job->state_desc);
  if (had_desc) job->state_desc = xstrdup(state_desc.c_str());
  job->qos_blocking_ptr = blocking;
  return ok;
}

// Carries the reshapes out as an operator's `scontrol update job` would (Slurm's
// update_job, under the locks of its update RPC), for the jobs still pending in the
// shape they were planned from. Not as the job's owner, whom Slurm does not let change
// the tasks per node; but first the new shape is checked against the owner's
// association and QOS limits as Slurm checks an owner's update, and afterwards the job
// keeps the limit flags it had, so that no count of it counts as set by an
// administrator, which limits do not hold.
void apply_reshapes(const std::vector<Reshape>& plans) {
  // The jobs whose reshape Slurm refused, and into what: a refusal is logged once, not
  // at every sample (the plan is made again at each one). Only the reshape thread uses it.
  static std::unordered_map<std::uint32_t, std::string> refused;
  if (refused.size() > 10000) refused.clear();
  const auto log_refusal = [](const Reshape& r, const std::string& why) {
    if (auto [it, added] = refused.try_emplace(r.job_id, r.to.layout());
        !added && it->second == r.to.layout()) {
      return;
    } else {
      it->second = r.to.layout();
    }
    info("dl: site_factor: JobId=%u not reshaped to %s: %s", r.job_id, r.to.layout().c_str(),
         why.c_str());
  };
  if (plans.empty()) return;
  std::size_t done = 0;
  {
    const SlurmctldLock lock({READ_LOCK, WRITE_LOCK, WRITE_LOCK, READ_LOCK, READ_LOCK});
    for (const Reshape& r : plans) {
      job_record_t* job = find_job_record(r.job_id);
      if (!job || !IS_JOB_PENDING(job) || !job->details || !(shape_of(job) == r.from)) continue;
      const std::uint32_t cpus = cpus_per_gpu(job);
      std::string why;
      if (!limits_allow(job, r.to, cpus, why)) {
        log_refusal(r, why);
        continue;
      }
      const std::vector<std::uint16_t> limit_set(job->limit_set.tres,
                                                 job->limit_set.tres + slurmctld_tres_cnt);
      auto* desc = static_cast<job_desc_msg_t*>(xmalloc(sizeof(job_desc_msg_t)));
      slurm_init_job_desc_msg(desc);
      desc->job_id = r.job_id;
      desc->min_nodes = desc->max_nodes = r.to.nodes_min;
      // One task per GPU: the tasks per node, and the CPUs they need on each node and in
      // all (Slurm would otherwise keep the old per-node CPUs and ask for them on every
      // new node, more than the tasks can use: never runnable).
      desc->ntasks_per_node = static_cast<std::uint16_t>(r.to.gpus_per_node);
      desc->pn_min_cpus = static_cast<std::uint16_t>(r.to.gpus_per_node * cpus);
      desc->min_cpus = r.to.nodes_min * r.to.gpus_per_node * cpus;
      desc->tres_per_node = xstrdup(r.tres_per_node.c_str());
      desc->comment = xstrdup(r.comment.c_str());
      slurm_msg_t msg;
      slurm_msg_t_init(&msg);
      msg.msg_type = REQUEST_UPDATE_JOB;
      msg.protocol_version = SLURM_PROTOCOL_VERSION;
      msg.data = desc;
      const int rc = update_job(&msg, 0, false);
      slurm_free_job_desc_msg(desc);
      std::copy(limit_set.begin(), limit_set.end(), job->limit_set.tres);
      if (rc == SLURM_SUCCESS) {
        ++done;
        info("dl: site_factor: JobId=%u reshaped from %s to %s, which fits now", r.job_id,
             r.from.layout().c_str(), r.to.layout().c_str());
      } else {
        log_refusal(r, slurm_strerror(rc));
      }
    }
  }
  if (done > 0) {
    schedule_job_save();
    queue_job_scheduler();
  }
}

// One pass over slurmctld's job list (list_for_each: its lock once, not per job), in
// which each job is scored and, when pending, given Slurm's priority while its record is
// still in the cache.
struct Sweep {
  Plugin& p;
  std::time_t now;
  bool reshape = false;
  std::size_t jobs = 0;
  std::size_t priorities = 0;
  std::vector<Waiting> waiting;  // reshape: the jobs a scheduler pass tries
  std::exception_ptr failed;     // exceptions must not cross Slurm's C frames
};

int visit(void* item, void* arg) {
  auto& sweep = *static_cast<Sweep*>(arg);
  auto* job = static_cast<job_record_t*>(item);
  try {
    ++sweep.jobs;
    score(sweep.p, job, sweep.now);
    if (refresh_priority(job)) ++sweep.priorities;
    if (sweep.reshape && waits_to_start(job)) sweep.waiting.push_back(Waiting::of(job));
  } catch (...) {
    sweep.failed = std::current_exception();
    return -1;  // stops list_for_each
  }
  return 0;
}

// One sample: every job into the ledger, purged jobs out of it, every pending job's
// priority recomputed, running jobs' factors refreshed for preempt/dl, and with
// reshape=yes the reshapes planned. Returns the ledger's text when it changed: the text
// needs only `mutex`, so it is made after slurmctld's job lock is released.
std::optional<std::string> sample(Plugin& p, std::vector<Reshape>& reshapes) {
  Sweep sweep{p, std::time(nullptr), false, 0, 0, {}, {}};
  {
    // The thresholds from the jobs the previous samples saw finish, before slurmctld's
    // lock is taken: a sort of up to kAdaptWindow numbers when a job has finished since.
    const std::lock_guard<std::mutex> hold(p.mutex);
    adapt_queues(p);
    sweep.reshape = p.params.reshape;
  }
  Ms ledger{};
  Ms held{};
  std::size_t waiting = 0;
  std::size_t looked = 0;
  {
    // Released however this returns: a lock leaked by an exception would stop slurmctld.
    const SlurmctldLock lock({NO_LOCK, WRITE_LOCK, READ_LOCK, READ_LOCK, NO_LOCK});
    const auto locked = Clock::now();
    const std::lock_guard<std::mutex> hold(p.mutex);
    p.ledger.begin_sweep();
    if (sweep.reshape) sweep.waiting.reserve(static_cast<std::size_t>(list_count(job_list)));
    {
      const Sweeping in_pass;
      list_for_each(job_list, visit, &sweep);
    }
    if (sweep.failed) std::rethrow_exception(sweep.failed);
    const auto swept = Clock::now();
    p.ledger.end_sweep();
    ledger = Clock::now() - swept;
    waiting = sweep.waiting.size();
    if (sweep.reshape) reshapes = plan_reshapes(std::move(sweep.waiting), looked);
    held = Clock::now() - locked;
  }
  const auto unlocked = Clock::now();
  const std::lock_guard<std::mutex> hold(p.mutex);
  p.ledger.expire(sweep.now);
  auto text = p.ledger.serialize();
  // bench/sched/lock_hold reads this line (SlurmctldDebug=debug).
  debug(
      "dl: site_factor: sampled %zu jobs, %zu priorities set; job write lock held %.3f ms "
      "(ledger %.3f); state text %.3f ms after",
      sweep.jobs, sweep.priorities, held.count(), ledger.count(),
      Ms(Clock::now() - unlocked).count());
  if (sweep.reshape) {
    debug("dl: site_factor: reshape looked at %zu of %zu waiting jobs, planned %zu", looked,
          waiting, reshapes.size());
  }
  if (text == p.saved) return std::nullopt;
  return text;
}

// What priority/multifactor does in its own refresh (with slurmdbd): each pending job's
// priority, under the same lock, the site factors left as they are. Logged, for the
// benchmark to compare sample() with.
int visit_baseline(void* item, void* arg) {
  auto* job = static_cast<job_record_t*>(item);
  auto& counts = *static_cast<std::pair<std::size_t, std::size_t>*>(arg);
  ++counts.first;
  if (refresh_priority(job)) ++counts.second;
  return 0;
}

void baseline_sample() {
  std::pair<std::size_t, std::size_t> counts;
  Ms held{};
  {
    const SlurmctldLock lock({NO_LOCK, WRITE_LOCK, READ_LOCK, READ_LOCK, NO_LOCK});
    const auto locked = Clock::now();
    const Sweeping in_pass;
    list_for_each(job_list, visit_baseline, &counts);
    held = Clock::now() - locked;
  }
  debug(
      "dl: site_factor: baseline, Slurm's refresh alone: %zu jobs, %zu priorities set; job "
      "write lock held %.3f ms",
      counts.first, counts.second, held.count());
}

void run_sampler(Plugin& p) {
  install_log_sink();
  bool baseline_turn = false;
  while (true) {
    std::chrono::seconds interval;
    {
      const std::lock_guard<std::mutex> hold(p.mutex);
      interval = p.params.interval;
    }
    {
      std::unique_lock<std::mutex> wait(p.stop_mutex);
      if (p.stop_cv.wait_for(wait, interval, [&] { return p.stopping; })) return;
    }
    baseline_turn = p.baselines && !baseline_turn;
    if (baseline_turn) {
      baseline_sample();
      continue;
    }
    try {
      std::vector<Reshape> reshapes;
      const auto text = sample(p, reshapes);
      apply_reshapes(reshapes);
      if (text) {
        save_durably(p.state_path, *text);
        const std::lock_guard<std::mutex> hold(p.mutex);
        p.saved = *text;
      }
    } catch (const std::exception& e) {
      error("dl: site_factor: sampling: %s", e.what());
    } catch (...) {
      // Anything leaving a thread's function ends slurmctld (std::terminate).
      error("dl: site_factor: sampling: unknown error");
    }
  }
}

void stop_sampler(Plugin& p) {
  {
    const std::lock_guard<std::mutex> hold(p.stop_mutex);
    p.stopping = true;
  }
  p.stop_cv.notify_all();
  if (p.sampler.joinable()) p.sampler.join();
}

int start() {
  Plugin& p = plugin();
  try {
    p.params = site_params();
    p.ledger.set_carry(carry_params(p.params));
  } catch (const InputError& e) {
    // A mistake in slurm.conf: refuse to run with priorities nobody asked for.
    fatal("dl: PrioritySiteFactorParameters: %s", e.what());
  }
  load_state(p);
  adapt_queues(p, true);
  p.baselines = std::getenv("DL_SITE_FACTOR_BASELINE") != nullptr;
  if (p.sampler.joinable()) stop_sampler(p);  // init twice without fini
  p.stopping = false;
  p.sampler = std::thread(run_sampler, std::ref(p));
  verbose("dl: %s %s loaded", plugin_type, PACKAGE_VERSION);
  return SLURM_SUCCESS;
}

void stop() { stop_sampler(plugin()); }

}  // namespace
}  // namespace dl::sched

extern "C" {
// Globals the plugin loader reads; `extern` keeps them visible from C++.
extern const char plugin_name[] = "slurm-dl site factor: least attained GPU service, with aging";
extern const char plugin_type[] = "site_factor/dl";
extern const uint32_t plugin_version = SLURM_VERSION_NUMBER;

int init(void) { return dl::sched::guarded("init", SLURM_ERROR, dl::sched::start); }

int fini(void) {
  dl::sched::guarded("fini", dl::sched::stop);
  return SLURM_SUCCESS;
}

void site_factor_p_reconfig(void) {
  dl::sched::guarded("site_factor_p_reconfig", [] {
    auto params = dl::sched::site_params();
    const std::lock_guard<std::mutex> hold(dl::sched::plugin().mutex);
    dl::sched::plugin().params = params;
    dl::sched::plugin().ledger.set_carry(dl::sched::carry_params(params));
    dl::sched::adapt_queues(dl::sched::plugin(), true);
  });
}

void site_factor_p_set(job_record_t* job_ptr) {
  if (dl::sched::sweeping) return;  // the sampler scored it just before
  dl::sched::guarded("site_factor_p_set", [&] {
    auto& p = dl::sched::plugin();
    const std::lock_guard<std::mutex> hold(p.mutex);
    dl::sched::score(p, job_ptr, std::time(nullptr));
  });
}

void site_factor_p_update(void) {
  dl::sched::guarded("site_factor_p_update", [] {
    auto& p = dl::sched::plugin();
    const std::time_t now = std::time(nullptr);
    const std::lock_guard<std::mutex> hold(p.mutex);
    dl::sched::SlurmListIterator it = list_iterator_create(job_list);
    while (auto* job = static_cast<job_record_t*>(list_next(it))) dl::sched::score(p, job, now);
    list_iterator_destroy(it);
  });
}
}
