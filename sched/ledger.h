// What the priority needs to know about each job over its whole life: its attained GPU
// service and how long it has waited, both counted over all its runs (Slurm forgets a
// job's previous runs and waits when it requeues it). site_factor/dl samples the
// controller's jobs every interval and feeds them here; the ledger is saved across
// restarts of slurmctld. A DL job's service also outlives it: when it ends, its
// service is carried, decaying, into an account of the work it did (its owner and its
// checkpoint directory), and a later job of the same owner that continues that work
// (--dl-resume-from, or the same --dl-ckpt-dir) starts with it. See dl-sched(8).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "sched/priority.h"

namespace dl {

// What slurmctld shows of a job at one sample, in the ledger's terms (epoch seconds).
struct JobSnapshot {
  bool running = false;
  bool pending = false;     // Slurm's base state PENDING
  bool completing = false;  // JOB_COMPLETING: its nodes are still cleaning up
  bool finished = false;
  bool held = false;  // priority 0, or no details to tell when it may start
  // Slurm has requeued it at least once (its restart count): a pending job never
  // requeued has never run, so its service is its wait since it became eligible.
  bool requeued = false;
  std::int64_t start = 0;
  std::int64_t submit = 0;
  std::int64_t begin = 0;
  // Slurm's accrue_time: since when a pending job has been accruing age (what
  // priority/multifactor counts); 0 while it does not, e.g. while it waits on a
  // dependency (Slurm leaves its BeginTime 0 then) or is over MaxJobsAccrue.
  std::int64_t accrue = 0;
  std::int64_t end = 0;    // when its run ended, if finished or completing
  std::uint32_t gpus = 0;  // running, or finished: the GPUs it had
  std::uint32_t uid = 0;   // its owner
};

// What the priority needs of one job: its service and waits so far, and its GPUs.
struct Service {
  double attained = 0;     // GPU-seconds of all runs, the current one up to now
  double waited = 0;       // seconds of all waits, the current one up to now
  std::uint32_t gpus = 0;  // GPUs of its latest run (0: it never ran)
};

// The work a DL job does, which its service follows to the jobs that continue it. Keyed
// on the owner: a user can name another user's directory, but never inherit (and so
// never lower the priority of) another user's service.
struct Work {
  std::uint32_t uid = 0;
  std::string own;     // --dl-ckpt-dir, or the job key ("4711") of its default directory
  std::string resume;  // --dl-resume-from (a path or a job key); empty: none
};

// How carried service decays and how many accounts are kept.
struct CarryParams {
  double half_life_s = 7 * 86400.0;   // as Slurm's PriorityDecayHalfLife default
  double floor_gpu_s = 36;            // an account decayed below this is forgotten
  std::size_t max_accounts = 100000;  // beyond this, the smallest accounts go
};

// Called only when the ledger needs a job's work (when it makes its entry, or for a
// pending job while some work is carried): the plugin reads the spec then, not at
// every sample.
using WorkOf = std::function<std::optional<Work>()>;

class ServiceLedger {
 public:
  void set_carry(const CarryParams& c) { carry_ = c; }

  // One sample of the job as slurmctld shows it: running(), pending() or stopped(),
  // and its service at `now` afterwards (one lookup: slurmctld's job lock is held).
  // A job requeued by preemption is PENDING and COMPLETING until its nodes have cleaned
  // up, and only then does Slurm give it a new SubmitTime and a BeginTime after the
  // requeue hold (batch_requeue_fini): until then it still carries the first
  // submission's time, so it is not waiting yet (its run ended at `end`). Once it has
  // its new SubmitTime, its run ended then (Slurm has reset its EndTime).
  // A pending job never requeued gets no entry (no lookup either: most of a long queue
  // is such jobs); a job first seen running gets one with its wait since it became
  // eligible.
  // With `work_of`, a job's entry starts with the service carried into its work, and
  // a pending job never requeued gets an entry when it has carried service.
  Service observe(std::uint32_t job, const JobSnapshot& s, std::int64_t now,
                  const WorkOf* work_of = nullptr);

  // The job is running, started at `start` (epoch seconds) on `gpus` GPUs. A start
  // time different from the one seen before means a new run: the previous run is
  // counted up to when it was last seen running. A wait in progress ends at `start`.
  void running(std::uint32_t job, std::int64_t start, std::uint32_t gpus, std::int64_t now);

  // The job is pending and may start from `eligible_since` on (a later time: not yet
  // eligible). A run in progress ends when it was last seen running.
  void pending(std::uint32_t job, std::int64_t eligible_since, std::int64_t now);

  // The job is neither running nor waiting (finished, held). `end` is when its run
  // ended if Slurm knows it (0 when not); otherwise when it was last seen running.
  void stopped(std::uint32_t job, std::int64_t end);

  // GPU-seconds of all runs so far, the current one up to `now`.
  double attained(std::uint32_t job, std::int64_t now) const;
  // Seconds of all waits so far, the current one up to `now`.
  double waited(std::uint32_t job, std::int64_t now) const;
  // The GPUs of the job's latest run (0: it never ran).
  std::uint32_t gpus(std::uint32_t job) const;

  // A sweep over all of slurmctld's jobs: begin_sweep(), observe() every job, then
  // end_sweep() forgets every job not observed since (purged by Slurm). No list of the
  // jobs seen is kept: each entry carries the number of the last sweep that saw it, and
  // the entries are only walked when fewer were seen than the ledger holds.
  void begin_sweep() {
    ++sweep_;
    seen_ = 0;
  }
  void end_sweep();

  std::size_t size() const { return jobs_.size(); }
  std::size_t accounts() const { return accounts_.size(); }

  // The service carried into `work` (the largest of the accounts it names), decayed to
  // `now`; 0 when none.
  double carried(const Work& work, std::int64_t now) const;
  // Forgets the accounts decayed below the floor. Walks every account: call it outside
  // slurmctld's locks.
  void expire(std::int64_t now);

  // The jobs seen finished after running on GPUs, each once, with their service
  // (GPU-seconds: their runs and what they carried in) and owner: what queues=pNN
  // takes its thresholds from (sched/priority.h, adapted_queues).
  const FinishedJobs& finished() const { return finished_; }

  // A text form with a checksum, for the state file. parse() throws InputError on
  // anything that is not exactly what serialize() writes.
  std::string serialize() const;
  static ServiceLedger parse(std::string_view text);

 private:
  struct Span {              // an open run or wait
    std::int64_t start = 0;  // 0: none open
    std::int64_t seen = 0;   // last time it was seen open
  };
  struct Entry {
    double gpu_s = 0;  // finished runs
    Span run;
    std::uint32_t gpus = 0;
    double wait_s = 0;  // finished waits
    Span wait;
    std::uint64_t sweep = 0;           // the last sweep that observed it (not saved)
    double carried = 0;                // service carried in from earlier jobs of its work
    std::shared_ptr<const Work> work;  // DL jobs only
    bool carried_out = false;          // its service is in its work's accounts (not saved)
  };
  struct Account {
    double gpu_s = 0;
    std::int64_t at = 0;  // when it had gpu_s
  };
  double decayed(const Account& a, std::int64_t now) const;
  void carry_out(Entry& e, std::int64_t now);
  void deposit(std::uint32_t uid, const std::string& key, double gpu_s, std::int64_t now);
  void start_entry(Entry& e, const WorkOf* work_of, std::int64_t now);
  static void end_run(Entry& e, std::int64_t at);
  static void end_wait(Entry& e, std::int64_t at);
  static void run(Entry& e, std::int64_t start, std::uint32_t gpus, std::int64_t now);
  static void wait(Entry& e, std::int64_t eligible_since, std::int64_t now);
  static void stop(Entry& e, std::int64_t end);
  static Service service(const Entry& e, std::int64_t now);
  std::unordered_map<std::uint32_t, Entry> jobs_;
  void mark(Entry& e) {
    if (e.sweep == sweep_) return;
    e.sweep = sweep_;
    ++seen_;
  }
  std::uint64_t sweep_ = 0;
  std::size_t seen_ = 0;  // entries marked in the current sweep
  std::int64_t last_now_ = 0;
  CarryParams carry_;
  std::map<std::pair<std::uint32_t, std::string>, Account> accounts_;
  FinishedJobs finished_;
};

}  // namespace dl
