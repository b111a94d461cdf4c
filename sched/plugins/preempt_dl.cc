// preempt/dl: Slurm's partition-priority preemption (PreemptMode=REQUEUE, GraceTime),
// with the DL policy's victims (sched/preempt.h, may_preempt):
//   - every job in a partition with a lower PriorityTier is a victim, DL or not, as
//     with preempt/partition_prio: slurm-dl never makes a job harder to preempt;
//   - within the same tier, a --dl-preemptible job is a victim of a job whose DL
//     priority (site_factor/dl) outranks it by the margin (sched/preempt.h);
//   - victims are ordered by the work they lose, least first (core victim_order):
//     Slurm's select plugin removes candidates in that order until the preemptor fits.
// The name must not contain "partition" or "qos": select/cons_tres keys its own
// partition and QOS preemption logic on those words in PreemptType. Its partition logic
// (job_test.c, preempt_by_part) only takes the cores of higher-tier and PreemptMode=OFF
// partitions out of what a job may use before it tests the preemption candidates; the
// candidates preempt_p_preemptable returns already exclude those jobs, so the same
// non-DL jobs are preempted as with preempt/partition_prio (sched.bats tests both).
// A job's --dl-preemptible and --dl-ckpt-every are read with job_submit/dl's own
// parser (spec_of, sched/spank_env.h), over a bounded part of its SPANK environment.
#include <ctime>
#include <optional>

#include "config.h"
#include "core/error.h"
#include "sched/plugins/controller.h"
#include "sched/plugins/guard.h"
#include "sched/preempt.h"

namespace dl::sched {
namespace {

// The job's spec; nullopt for a job without one, or with one job_submit/dl did not
// write (a job queued before it was configured): such a job is not a DL victim.
std::optional<Spec> dl_spec(const job_record_t* job) {
  try {
    return spec_of(job);
  } catch (const InputError& e) {
    debug("dl: preempt: JobId=%u: its DL spec is not read: %s", job->job_id, e.what());
    return std::nullopt;
  }
}

// The job's --dl-ckpt-every in seconds (unset: no periodic checkpoints).
std::optional<double> ckpt_every(const std::optional<Spec>& spec) {
  if (spec && spec->ckpt_every) return static_cast<double>(spec->ckpt_every->count());
  return std::nullopt;
}

std::uint16_t preempt_mode(const job_record_t* job) {
  const part_record_t* part = job->part_ptr;
  if (part && part->preempt_mode != NO_VAL16) return part->preempt_mode & ~PREEMPT_MODE_GANG;
  return slurm_conf.preempt_mode & ~PREEMPT_MODE_GANG;
}

double points(const job_record_t* job) {
  return static_cast<double>(static_cast<std::int64_t>(job->site_factor) - NICE_OFFSET);
}

bool preemptable(const job_record_t* victim, const job_record_t* preemptor) {
  // Slurm asks about every job of its job list, pending ones too, for each job it tries
  // to place, and only then keeps the running ones (_add_preemptable_job): with 10,000
  // jobs queued, reading their options made backfill try a third as many jobs a cycle.
  if (!IS_JOB_RUNNING(victim) && !IS_JOB_SUSPENDED(victim)) return false;
  const part_record_t* vp = victim->part_ptr;
  const part_record_t* pp = preemptor->part_ptr;
  if (!vp || !pp) return false;
  PreemptPair pair;
  pair.victim_tier = vp->priority_tier;
  pair.preemptor_tier = pp->priority_tier;
  pair.victim_mode_off = vp->preempt_mode == PREEMPT_MODE_OFF;
  if (const auto decided = partitions_decide(pair)) return *decided;
  const std::optional<Spec> spec = dl_spec(victim);
  pair.victim_dl_preemptible = spec && spec->preemptible;
  pair.dl_priority = site_factor_is_dl();
  pair.victim_points = points(victim);
  pair.preemptor_points = points(preemptor);
  pair.victim_progress_s = checkpointed_progress(run_seconds(victim, std::time(nullptr)));
  pair.victim_ckpt_every_s = ckpt_every(spec);
  return may_preempt(pair, site_params());
}

// Work the job loses if stopped now: its GPUs (at least one, so CPU jobs count by
// their run time) times the time since its last checkpoint, which for a DL job with
// --dl-ckpt-every is counted from its start in steps of that interval.
double lost_gpu_seconds(const job_record_t* job) {
  const double since =
      seconds_since_checkpoint(run_seconds(job, std::time(nullptr)), ckpt_every(dl_spec(job)));
  return std::max<std::uint32_t>(allocated_gpus(job), 1) * since;
}

std::uint32_t victim_priority(const job_record_t* job) {
  const std::uint32_t tier = job->part_ptr ? job->part_ptr->priority_tier : 0;
  return (tier << 16) | victim_rank(lost_gpu_seconds(job));
}

}  // namespace
}  // namespace dl::sched

extern "C" {
// Globals the plugin loader reads; `extern` keeps them visible from C++.
extern const char plugin_name[] =
    "slurm-dl preemption: partition tiers, DL victims losing the least work";
extern const char plugin_type[] = "preempt/dl";
extern const uint32_t plugin_version = SLURM_VERSION_NUMBER;

int init(void) {
  return dl::sched::guarded("init", SLURM_ERROR, [] {
    verbose("dl: %s %s loaded", plugin_type, PACKAGE_VERSION);
    return SLURM_SUCCESS;
  });
}

void fini(void) {}

// Queue order (as preempt/partition_prio): a job that may preempt another by tier is
// considered first.
bool preempt_p_job_preempt_check(job_queue_rec_t* preemptor, job_queue_rec_t* preemptee) {
  return preemptor->part_ptr && preemptee->part_ptr &&
         bit_overlap_any(preemptor->part_ptr->node_bitmap, preemptee->part_ptr->node_bitmap) &&
         preemptor->part_ptr->priority_tier > preemptee->part_ptr->priority_tier;
}

bool preempt_p_preemptable(job_record_t* preemptee, job_record_t* preemptor) {
  return dl::sched::guarded("preempt_p_preemptable", false,
                            [&] { return dl::sched::preemptable(preemptee, preemptor); });
}

int preempt_p_get_data(job_record_t* job_ptr, slurm_preempt_data_type_t data_type, void* data) {
  return dl::sched::guarded("preempt_p_get_data", SLURM_ERROR, [&] {
    switch (data_type) {
      case PREEMPT_DATA_ENABLED:
        *static_cast<bool*>(data) = slurm_conf.preempt_mode != PREEMPT_MODE_OFF;
        return SLURM_SUCCESS;
      case PREEMPT_DATA_MODE:
        *static_cast<std::uint16_t*>(data) = dl::sched::preempt_mode(job_ptr);
        return SLURM_SUCCESS;
      case PREEMPT_DATA_PRIO:
        *static_cast<std::uint32_t*>(data) = dl::sched::victim_priority(job_ptr);
        return SLURM_SUCCESS;
      case PREEMPT_DATA_GRACE_TIME:
        *static_cast<std::uint32_t*>(data) = job_ptr->part_ptr ? job_ptr->part_ptr->grace_time : 0;
        return SLURM_SUCCESS;
    }
    error("dl: preempt_p_get_data: unknown request %d", static_cast<int>(data_type));
    return SLURM_ERROR;
  });
}
}
