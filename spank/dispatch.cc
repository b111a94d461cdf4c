// SPANK entry points. Each one only dispatches on the context; the work lives in one
// file per context. Contexts a hook does not handle return 0.
#include "config.h"
#include "spank/contexts.h"
#include "spank/guard.h"

extern "C" {
// SPANK_PLUGIN defines const globals, which C++ would give internal linkage.
extern const char plugin_name[];
extern const char plugin_type[];
extern const unsigned int plugin_version;
extern const unsigned int spank_plugin_version;
SPANK_PLUGIN(dl, 1);

int slurm_spank_user_init(spank_t sp, int, char**) {
  return dl::spank::guarded("slurm_spank_user_init", [&] {
    return spank_context() == S_CTX_REMOTE ? dl::spank::slurmstepd_user_init(sp) : 0;
  });
}
}
