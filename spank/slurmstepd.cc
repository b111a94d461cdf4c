// slurmstepd context: runs as root inside the job step, once per node.
#include "config.h"
#include "core/error.h"
#include "spank/contexts.h"

namespace dl::spank {

int slurmstepd_user_init(spank_t sp) {
  // Tasks and dlrun use this to know the plugin is active on this node.
  if (spank_setenv(sp, "DL_SPANK_VERSION", PACKAGE_VERSION, 1) != ESPANK_SUCCESS) {
    throw SystemError("couldn't set DL_SPANK_VERSION in the task environment");
  }
  return 0;
}

}  // namespace dl::spank
