// Preemption victims and the rules for preemptible jobs' deadlines. Used by the
// preempt/dl plugin (victim order), job_submit/dl (signal and time_min) and dl-sim.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "sched/priority.h"

namespace dl {

// Seconds of work a running job loses if it is stopped now: the time since its last
// checkpoint. With periodic checkpoints every `ckpt_every_s` seconds since its
// (re)start that is run_s mod ckpt_every_s; without, the whole run.
double seconds_since_checkpoint(double run_s, std::optional<double> ckpt_every_s);

// With discretized queues a running job is a victim only right after it has saved a
// periodic checkpoint (`progress_s`: seconds since its run started, the restore of a
// restarted run included, which is what dlrun counts its periodic checkpoints in):
// within `slack_s` after one of its checkpoints at ckpt_every_s, 2 x ckpt_every_s, ...
// It then loses at most slack_s of work, every run keeps at least one interval, and
// jobs of a lower queue are not started and stopped again before they get anywhere. A
// job without periodic checkpoints (it checkpoints on the signal) always qualifies.
bool just_checkpointed(double progress_s, std::optional<double> ckpt_every_s, double slack_s);

// The progress just_checkpointed may assume of a job that slurmctld sees running for
// `whole_run_s`: Slurm's clock counts whole seconds, so now - start_time may be up to
// a second more than the job has run, and its checkpoint due at k x ckpt_every is not
// written yet when the run time first shows that value; nor a second later when the
// job's program started a fraction of a second after Slurm started the job late in a
// second. The run time less two seconds (at least 0). (dl-sim's own model knows the
// run time exactly.)
double checkpointed_progress(double whole_run_s);

struct VictimCandidate {
  std::uint64_t id = 0;
  std::uint32_t gpus = 0;
  double since_ckpt_s = 0;
  bool preemptible = false;

  double lost_gpu_s() const { return gpus * since_ckpt_s; }
};

// The candidates a preemptor may take, in the order it should take them: preemptible
// ones only, least lost GPU-seconds first, then fewer GPUs, then the higher id (the
// newer job).
std::vector<VictimCandidate> victim_order(std::vector<VictimCandidate> candidates);

// A 16-bit rank that sorts like lost GPU-seconds (logarithmic, 1/2048 of a doubling
// per step), for Slurm's preempt interface, which orders candidates by a 32-bit value
// whose upper half is the partition's PriorityTier.
std::uint16_t victim_rank(double lost_gpu_s);

// A what-if view of the cluster in which candidates can be stopped and brought back.
class VictimTrial {
 public:
  virtual ~VictimTrial() = default;
  virtual void release(const VictimCandidate& victim) = 0;
  virtual void take_back(const VictimCandidate& victim) = 0;
  virtual bool preemptor_fits() const = 0;
};

// The victims that make room for the preemptor while losing the least work:
// candidates are released in victim_order() until the preemptor fits; then every
// victim that is not needed after all is taken back (the most expensive first). The
// trial is left with the chosen victims released. Empty (trial unchanged) when even
// all candidates do not make room.
std::vector<VictimCandidate> choose_victims(std::vector<VictimCandidate> candidates,
                                            VictimTrial& trial);

// What preempt/dl knows of a running job (victim) and a pending one (preemptor).
struct PreemptPair {
  std::uint32_t victim_tier = 0;     // PriorityTier of the victim's partition
  std::uint32_t preemptor_tier = 0;  // and of the preemptor's
  bool victim_mode_off = false;      // the victim's partition has PreemptMode=OFF
  bool victim_dl_preemptible = false;
  bool dl_priority = false;  // site_factor/dl computes the points below
  double victim_points = 0;
  double preemptor_points = 0;
  // Discretized queues only (just_checkpointed): the victim's current run time.
  double victim_progress_s = 0;
  std::optional<double> victim_ckpt_every_s;
};

// Whether the preemptor may preempt the victim. Every job, DL or not and with or
// without --dl-preemptible, is a victim of a job in a partition of a higher
// PriorityTier, exactly as with preempt/partition_prio: slurm-dl never makes a job
// harder to preempt. --dl-preemptible only adds: within the same tier, a victim of a
// job whose DL priority outranks it by the margin (and checkpoint-and-requeue); with
// discretized queues, of a job in a lower queue when it just_checkpointed() (slack:
// two site-factor intervals, how often preempt/dl sees fresh points).
bool may_preempt(const PreemptPair& pair, const PriorityParams& p);

// What the partitions alone decide (the victim's PreemptMode=OFF, different tiers), or
// nullopt when the victim and the preemptor share a tier and the DL fields decide. Only
// then does preempt/dl read the jobs' options, which Slurm asks for every running job
// each time it looks for victims of a pending one.
std::optional<bool> partitions_decide(const PreemptPair& pair);

// Whether a pending job with `preemptor_points` may preempt a running preemptible job
// with `victim_points` of the same tier: it must outrank it by PriorityParams::margin();
// with discretized queues, its points must stand for a lower queue than the victim's
// (the victim crossed a queue threshold that the preemptor has not).
bool outranks(double preemptor_points, double victim_points, const PriorityParams& p);

// A preemptible job hears about its end (SIGUSR2 to its steps) warn_time before it:
// its grace (the time it needs to write a checkpoint) plus 30 s for the signal to
// arrive and the launcher to react. Throws InputError when that exceeds what Slurm's
// --signal can express (65535 s).
std::chrono::seconds warn_time(std::chrono::seconds grace);

// The checkpoint-aware backfill rule: a preemptible job may start in any hole of at
// least 4 x warn_time (rounded up to whole minutes, Slurm's unit): it checkpoints when
// the hole closes and is requeued, and at most a quarter of the run goes to the final
// checkpoint. nullopt when that is not shorter than the time limit.
std::optional<std::chrono::seconds> backfill_time_min(std::chrono::seconds grace,
                                                      std::optional<std::chrono::seconds> limit);

}  // namespace dl
