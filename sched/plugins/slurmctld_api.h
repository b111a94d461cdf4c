// The one place that includes slurmctld's private headers (from the configured Slurm
// source of exactly the installed version). They are C, so they are wrapped in
// extern "C". src/common/slurm_xlator.h is deliberately not included: slurmctld
// exports Slurm's functions under their plain names, and its object-like
// `#define error slurm_error` would rename every C++ identifier called `error`.
#pragma once

extern "C" {
#include "src/common/gres.h"
#include "src/common/list.h"
#include "src/common/log.h"
#include "src/common/node_conf.h"
#include "src/common/slurm_topology.h"
#include "src/common/xmalloc.h"
#include "src/common/xstring.h"
#include "src/slurmctld/job_scheduler.h"
#include "src/slurmctld/locks.h"
#include "src/slurmctld/preempt.h"
#include "src/slurmctld/slurmctld.h"
#include "src/slurmctld/state_save.h"
}
