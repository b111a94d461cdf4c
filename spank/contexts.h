// One module per SPANK context, as in pyxis; dispatch.cc only switches on
// spank_context() and calls these.
#pragma once

#include "spank/spank_api.h"

namespace dl::spank {

// sbatch/salloc (allocator) and srun (local): check the options, hand the spec to
// the controller (submit.cc).
int submit_post_opt(spank_t sp);

// slurmstepd (remote), as root: rebuild the spec from the forwarded options and
// resolve the checkpoint directory (slurmstepd.cc).
int slurmstepd_post_opt(spank_t sp);

// slurmstepd (remote), in each task as the job's user before exec: create the
// checkpoint directory and give the task the DL_* variables (slurmstepd.cc).
int slurmstepd_task_init(spank_t sp);

// slurmstepd (remote), as root, as each task's exit status is collected: notes whether
// a task exited with kExitCulpritStep (drain_after; slurmstepd.cc).
int slurmstepd_task_exit(spank_t sp);

// slurmstepd (remote), as root once the step's tasks are gone: records the step's outcome
// for drain_after and drains the node when two steps in a row of the job were its culprit
// (core/drain.h); removes the channel files of the step's dlrun ranks that did not remove
// their own (slurmstepd.cc).
int slurmstepd_exit(spank_t sp);

// The job prolog and epilog (job script context), as root: with gpu_metrics=DIR, record
// and remove the job's GPUs on this node for dl-gpu-metrics (job_script.cc). Slurm calls
// no slurm_spank_init in this context: they read the plugstack arguments themselves.
int job_prolog(spank_t sp, int argc, char** argv);
int job_epilog(spank_t sp, int argc, char** argv);

}  // namespace dl::spank
