// Attained GPU service of each job, counted over all its runs (Slurm forgets a
// job's previous runs when it requeues it). site_factor/dl samples the controller's
// jobs every interval and feeds them here; the ledger is saved across restarts.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace dl {

class AttainedService {
 public:
  // The job is running, started at `start` (epoch seconds) on `gpus` GPUs. A start
  // time different from the one seen before means a new run: the previous run is
  // banked up to when it was last seen running.
  void running(std::uint32_t job, std::int64_t start, std::uint32_t gpus, std::int64_t now);

  // The job is not running. `end` is when its run ended if Slurm still knows it (0
  // when not: a requeued job has its times cleared); the run is banked up to `end`,
  // or up to when it was last seen running.
  void stopped(std::uint32_t job, std::int64_t end);

  // GPU-seconds of all runs so far, the current one up to `now`.
  double attained(std::uint32_t job, std::int64_t now) const;

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
  static AttainedService parse(std::string_view text);

 private:
  struct Entry {
    double banked_gpu_s = 0;
    std::int64_t run_start = 0;  // 0: not running
    std::uint32_t run_gpus = 0;
    std::int64_t last_seen = 0;
  };
  static void bank(Entry& e, std::int64_t until);
  std::map<std::uint32_t, Entry> jobs_;
};

}  // namespace dl
