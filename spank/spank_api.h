// The one place that includes Slurm's spank.h. In 22.05 it declares the
// slurm_spank_* hooks outside its own extern "C" block, so the whole header is wrapped.
#pragma once

extern "C" {
#include <slurm/spank.h>
}
