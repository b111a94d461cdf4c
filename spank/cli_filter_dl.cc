// cli_filter/dl: a step of a DL job uses PMIx unless its user chose an MPI type, so that
// `srun dlrun PROGRAM` works without --mpi=pmix. A step is a DL job's when srun itself
// has a --dl-* option, or runs inside a DL job (its environment has the spec's marker,
// which the SPANK plugin gives DL jobs only). Every other step keeps the site's
// MpiDefault, and sbatch and salloc are untouched. Loaded by srun, sbatch and salloc
// (CliFilterPlugins=cli_filter/dl in slurm.conf on the hosts users submit from), where
// srun's options are settable until it checks them, right after this filter.
#include <cstdint>
#include <cstdlib>
#include <cstring>

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

// Whether srun's own command line has an option of spank_dl.so.
bool has_dl_option() {
  bool found = false;
  char *plugin = nullptr, *name = nullptr, *value = nullptr;
  void* state = nullptr;
  // Runs to the end: the iteration frees its state only there.
  while (spank_option_get_next_set(&plugin, &name, &value, &state)) {
    if (name && std::strncmp(name, "dl-", 3) == 0) found = true;
    xfree(plugin);
    xfree(name);
    xfree(value);
  }
  return found;
}

}  // namespace

extern "C" {

extern const char plugin_name[] = "slurm-dl: PMIx for the steps of DL jobs";
extern const char plugin_type[] = "cli_filter/dl";
extern const uint32_t plugin_version = SLURM_VERSION_NUMBER;

int init(void) { return SLURM_SUCCESS; }

void fini(void) {}

int cli_filter_p_setup_defaults(slurm_opt_t*, bool) { return SLURM_SUCCESS; }

int cli_filter_p_pre_submit(slurm_opt_t* opt, int) {
  // srun only; --mpi and SLURM_MPI_TYPE set mpi_type, and they win.
  if (!opt || !opt->srun_opt || opt->srun_opt->mpi_type) return SLURM_SUCCESS;
  if (std::getenv(dl::kSpecMarker) || has_dl_option()) {
    opt->srun_opt->mpi_type = xstrdup("pmix");
  }
  return SLURM_SUCCESS;
}

void cli_filter_p_post_submit(int, uint32_t, uint32_t) {}

}  // extern "C"
