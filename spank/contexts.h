// One module per SPANK context, as in pyxis; dispatch.cc only switches on
// spank_context() and calls these.
#pragma once

#include "spank/spank_api.h"

namespace dl::spank {

// slurmstepd (remote context), running as root for the job's user.
int slurmstepd_user_init(spank_t sp);

}  // namespace dl::spank
