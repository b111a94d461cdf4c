// SPANK entry points. Each one only dispatches on the context; the work lives in one
// file per context. Contexts a hook does not handle return 0.
#include "config.h"
#include "spank/contexts.h"
#include "spank/guard.h"
#include "spank/state.h"

extern "C" {
// SPANK_PLUGIN defines const globals, which C++ would give internal linkage.
extern const char plugin_name[];
extern const char plugin_type[];
extern const unsigned int plugin_version;
extern const unsigned int spank_plugin_version;
SPANK_PLUGIN(dl, 1);

int slurm_spank_init(spank_t sp, int argc, char** argv) {
  return dl::spank::guarded("slurm_spank_init", [&] {
    dl::spank::load_site_config(argc, argv);
    switch (spank_context()) {
      case S_CTX_LOCAL:
      case S_CTX_ALLOCATOR:
      case S_CTX_REMOTE: dl::spank::register_options(sp); return 0;
      // Once per slurmd start: the default root made by root (not by the first user to
      // need it), and in the log where checkpoints of requeued jobs are lost.
      case S_CTX_SLURMD:
        dl::spank::make_default_ckpt_root();
        dl::spank::check_ckpt_root_sharing();
        return 0;
      default: return 0;
    }
  });
}

int slurm_spank_init_post_opt(spank_t sp, int, char**) {
  return dl::spank::guarded("slurm_spank_init_post_opt", [&] {
    switch (spank_context()) {
      case S_CTX_LOCAL:
      case S_CTX_ALLOCATOR: return dl::spank::submit_post_opt(sp);
      case S_CTX_REMOTE: return dl::spank::slurmstepd_post_opt(sp);
      default: return 0;
    }
  });
}

// In the task rather than in user_init: a failure here fails the task with a
// non-zero exit status, so the job ends FAILED and srun exits non-zero, where a
// user_init failure leaves a batch job COMPLETED with nothing run.
int slurm_spank_task_init(spank_t sp, int, char**) {
  return dl::spank::guarded("slurm_spank_task_init", [&] {
    return spank_context() == S_CTX_REMOTE ? dl::spank::slurmstepd_task_init(sp) : 0;
  });
}

// As root in slurmstepd (Slurm reclaims its privileges before both): drain_after, and
// at the step's end the channel files a SIGKILLed dlrun left.
int slurm_spank_task_exit(spank_t sp, int, char**) {
  return dl::spank::guarded("slurm_spank_task_exit", [&] {
    return spank_context() == S_CTX_REMOTE ? dl::spank::slurmstepd_task_exit(sp) : 0;
  });
}

int slurm_spank_exit(spank_t sp, int, char**) {
  return dl::spank::guarded("slurm_spank_exit", [&] {
    return spank_context() == S_CTX_REMOTE ? dl::spank::slurmstepd_exit(sp) : 0;
  });
}

// As root, for every job with GPUs on the node, DL or not: the GPU records of
// gpu_metrics (off by default).
int slurm_spank_job_prolog(spank_t sp, int argc, char** argv) {
  return dl::spank::guarded("slurm_spank_job_prolog", [&] {
    return spank_context() == S_CTX_JOB_SCRIPT ? dl::spank::job_prolog(sp, argc, argv) : 0;
  });
}

int slurm_spank_job_epilog(spank_t sp, int argc, char** argv) {
  return dl::spank::guarded("slurm_spank_job_epilog", [&] {
    return spank_context() == S_CTX_JOB_SCRIPT ? dl::spank::job_epilog(sp, argc, argv) : 0;
  });
}
}
