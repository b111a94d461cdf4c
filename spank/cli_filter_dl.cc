// cli_filter/dl: a step of a DL job uses PMIx unless its user chose an MPI type, so that
// `srun dlrun PROGRAM` works without --mpi=pmix; and `srun dlrun` without a task layout
// (-n, --ntasks-per-node) starts one task per GPU of --dl-gpus, as a batch job's ranks
// are laid out, whether srun creates the job or runs in one (salloc). A step is a DL
// job's when srun itself has a --dl-* option, or runs inside a DL job (its environment
// has the spec's marker, which the SPANK plugin gives DL jobs only). Every other step
// keeps the site's MpiDefault and task count, and sbatch and salloc are untouched. Loaded
// by srun, sbatch and salloc (CliFilterPlugins=cli_filter/dl in slurm.conf on the hosts
// users submit from), where srun's options are settable until it checks them, right
// after this filter.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/spec.h"

extern "C" {
// spank_option_get_next_set: src/common/plugstack.h in 22.05, src/common/spank.h in 24.11
// (configure says which).
#ifdef DL_SLURM_SPANK_H
#include "src/common/spank.h"
#else
#include "src/common/plugstack.h"
#endif
#include "src/common/slurm_opt.h"
#include "src/common/xmalloc.h"
#include "src/common/xstring.h"
}

namespace {

struct DlOptions {
  bool any = false;  // srun's own command line has an option of spank_dl.so
  std::string gpus;  // its --dl-gpus, or ""
};

DlOptions dl_options() {
  DlOptions found;
  char *plugin = nullptr, *name = nullptr, *value = nullptr;
  void* state = nullptr;
  // Runs to the end: the iteration frees its state only there.
  while (spank_option_get_next_set(&plugin, &name, &value, &state)) {
    if (name && std::strncmp(name, "dl-", 3) == 0) found.any = true;
    if (name && value && std::strcmp(name, "dl-gpus") == 0) found.gpus = value;
    xfree(plugin);
    xfree(name);
    xfree(value);
  }
  return found;
}

// A GPU count as --dl-gpus or DL_GPUS gives it; 0 for none (the SPANK plugin rejects a
// malformed one with its own message).
int gpu_count(const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return 0;
  if (text.size() > 4) return 0;
  return std::stoi(text);
}

// srun's command (the program and its arguments): in srun's own options in 22.05, in the
// common ones in 24.11 (configure says which).
const char* command_name(const slurm_opt_t* opt) {
#ifdef DL_SLURM_OPT_ARGV
  const int argc = opt->argc;
  char** argv = opt->argv;
#else
  const int argc = opt->srun_opt->argc;
  char** argv = opt->srun_opt->argv;
#endif
  return argc >= 1 && argv ? argv[0] : nullptr;
}

bool runs_dlrun(const slurm_opt_t* opt) {
  const char* command = command_name(opt);
  if (!command) return false;
  const char* slash = std::strrchr(command, '/');
  return std::strcmp(slash ? slash + 1 : command, "dlrun") == 0;
}

}  // namespace

extern "C" {

extern const char plugin_name[] = "slurm-dl: PMIx and one task per GPU for the steps of DL jobs";
extern const char plugin_type[] = "cli_filter/dl";
extern const uint32_t plugin_version = SLURM_VERSION_NUMBER;

int init(void) { return SLURM_SUCCESS; }

void fini(void) {}

int cli_filter_p_setup_defaults(slurm_opt_t*, bool) { return SLURM_SUCCESS; }

int cli_filter_p_pre_submit(slurm_opt_t* opt, int) {
  // srun only; --mpi and SLURM_MPI_TYPE set mpi_type, and they win.
  if (!opt || !opt->srun_opt) return SLURM_SUCCESS;
  const DlOptions dl = dl_options();
  const char* in_dl_job = std::getenv(dl::kSpecMarker);
  if (!in_dl_job && !dl.any) return SLURM_SUCCESS;
  if (!opt->srun_opt->mpi_type) opt->srun_opt->mpi_type = xstrdup("pmix");
  // --ntasks and SLURM_NTASKS set ntasks_set; --ntasks-per-node and SLURM_NTASKS_PER_NODE
  // set ntasks_per_node; they win.
  if (opt->ntasks_set || opt->ntasks_per_node != static_cast<int>(NO_VAL) || !runs_dlrun(opt)) {
    return SLURM_SUCCESS;
  }
  // Inside the job: its spec, or in salloc's shell the SPANK plugin's copy of it.
  const char* job_gpus = std::getenv("DL_GPUS");
  if (!job_gpus) job_gpus = std::getenv("SLURM_SPANK_DL_GPUS");
  if (const int gpus = gpu_count(!dl.gpus.empty() ? dl.gpus : job_gpus ? job_gpus : "")) {
    opt->ntasks = gpus;
    opt->ntasks_set = true;
  }
  return SLURM_SUCCESS;
}

void cli_filter_p_post_submit(int, uint32_t, uint32_t) {}

}  // extern "C"
