// What the plugins read from slurmctld's records, in the core's terms. Callers hold
// the locks slurmctld holds for the hook they are in (read locks on jobs, nodes and
// partitions at least).
#pragma once

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "core/spec.h"
#include "sched/gang.h"
#include "sched/plugins/slurmctld_api.h"
#include "sched/priority.h"
#include "sched/spank_env.h"

namespace dl::sched {

// A bounded lookup over a SPANK job environment ("NAME=value" strings), as
// job_desc_msg_t and job_record_t carry it (sched/spank_env.h).
EnvLookup env_of(char** env, std::uint32_t size);

// The job's DL spec, read by the one parser every plugin shares (sched/spank_env.h);
// nullopt for a job without one. Throws InputError on a malformed spec (job_submit/dl
// lets none through).
std::optional<Spec> spec_of(const job_record_t* job);

// The GPUs of each node of the partition and its leaf switches (topology/tree).
Capacity capacity_of(const part_record_t* part);

// GPUs allocated to a running job.
std::uint32_t allocated_gpus(const job_record_t* job);

// What is free now on each node of slurmctld's node table (indexed by node index): the
// GPUs not allocated and the node's CPUs (all of them: the allocated count needs the
// node write lock); nothing on a node that is not available (down, drained, not
// responding) or that a job holds exclusively.
std::vector<FreeNode> free_nodes();

// The GPUs per node a pending job asks for (its GRES request), 0 for none.
std::uint32_t requested_gpus_per_node(const job_record_t* job);

// Seconds the job has run since it last started (suspended time excluded).
double run_seconds(const job_record_t* job, std::time_t now);

// The partition's limit for a job that gave none, or the job's; nullopt: infinite.
std::optional<std::chrono::seconds> time_limit(std::uint32_t minutes, const part_record_t* part);

// PrioritySiteFactorParameters, parsed again whenever its text changes.
PriorityParams site_params();

// Whether site_factor/dl computes the jobs' site factors (the preempt plugin compares
// them only then).
bool site_factor_is_dl();

}  // namespace dl::sched
