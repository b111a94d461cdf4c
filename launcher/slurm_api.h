// The one place dlrun and dl-jobs include libslurm's public headers from, and the one
// place where the supported Slurm releases differ for them (configure's checks, in
// config.h).
#pragma once

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "config.h"

// Exported by libslurm (the names squeue prints for a job's state and pending reason)
// but not declared in <slurm/slurm.h>. 23.02 renamed the reason's.
extern "C" {
char* slurm_job_state_string(uint32_t state);
#if HAVE_SLURM_JOB_STATE_REASON_STRING
const char* slurm_job_state_reason_string(enum job_state_reason reason);
#else
char* slurm_job_reason_string(enum job_state_reason reason);
#endif
}

namespace dl::slurm {

inline const char* reason_string(job_state_reason reason) {
#if HAVE_SLURM_JOB_STATE_REASON_STRING
  return slurm_job_state_reason_string(reason);
#else
  return slurm_job_reason_string(reason);
#endif
}

// Whether slurmctld refused an update because the job's accounting index is being set.
// Slurm 22.05 answers so right after a requeue, and without slurmdbd keeps answering so
// for a job that was resized until its requeue is complete (_update_job in
// src/slurmctld/job_mgr.c); 24.11 has no such answer.
inline bool setting_db_index(int rc) {
#if HAVE_DECL_ESLURM_JOB_SETTING_DB_INX
  return rc == ESLURM_JOB_SETTING_DB_INX;
#else
  (void)rc;
  return false;
#endif
}

// slurmctld requeues a batch job that ends within the GraceTime of its preemption since
// 24.05 (proc_req.c, _slurm_rpc_complete_batch_script; GRACE_PREEMPT): a behaviour of the
// controller, so the release says it.
inline constexpr bool kRequeuesJobEndingInGrace =
    SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(24, 5, 0);

}  // namespace dl::slurm
