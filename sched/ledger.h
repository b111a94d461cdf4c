// What the priority needs to know about each job over its whole life: its attained GPU
// service and how long it has waited, both counted over all its runs (Slurm forgets a
// job's previous runs and waits when it requeues it). site_factor/dl samples the
// controller's jobs every interval and feeds them here; the ledger is saved across
// restarts of slurmctld.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace dl {

// What slurmctld shows of a job at one sample, in the ledger's terms (epoch seconds).
struct JobSnapshot {
  bool running = false;
  bool pending = false;     // Slurm's base state PENDING
  bool completing = false;  // JOB_COMPLETING: its nodes are still cleaning up
  bool finished = false;
  bool held = false;  // priority 0, or no details to tell when it may start
  std::int64_t start = 0;
  std::int64_t submit = 0;
  std::int64_t begin = 0;
  std::int64_t end = 0;  // when its run ended, if finished or completing
  std::uint32_t gpus = 0;
};

class ServiceLedger {
 public:
  // One sample of the job as slurmctld shows it: running(), pending() or stopped().
  // A job requeued by preemption is PENDING and COMPLETING until its nodes have cleaned
  // up, and only then does Slurm give it a new SubmitTime and a BeginTime after the
  // requeue hold (batch_requeue_fini): until then it still carries the first
  // submission's time, so it is not waiting yet (its run ended at `end`). Once it has
  // its new SubmitTime, its run ended then (Slurm has reset its EndTime).
  void observe(std::uint32_t job, const JobSnapshot& s, std::int64_t now);

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

  // Forgets every job for which `keep` returns false (purged by Slurm).
  template <typename Keep>
  void retain(Keep&& keep) {
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      it = keep(it->first) ? std::next(it) : jobs_.erase(it);
    }
  }

  std::size_t size() const { return jobs_.size(); }

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
  };
  static void end_run(Entry& e, std::int64_t at);
  static void end_wait(Entry& e, std::int64_t at);
  std::map<std::uint32_t, Entry> jobs_;
};

}  // namespace dl
