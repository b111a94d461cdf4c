// The end of a run: what becomes of the job (finished, requeued, held, failed), told to
// Slurm, with the restart history kept for the next run. Rank 0's coordinator calls it;
// so does rank 1 when rank 0's dlrun itself is gone.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "launcher/job_control.h"
#include "launcher/restart.h"
#include "launcher/status.h"
#include "launcher/supervisor.h"

namespace dl {

// Carries out the end of a run as plan_run_end (launcher/run_end_plan.h) decides it from
// the job's restart history, its newest checkpoint and whether it can be requeued, and
// tells Slurm. When `ending.lost_node`'s slurmd does not answer either, the node has
// failed, and slurmctld does not know yet (it waits SlurmdTimeout). A requeue then would
// leave the job completing on the dead node until slurmctld gives up on it, after which
// Slurm 22.05 loses the GPUs of the job's next allocation ("gres/gpu: ... node offset
// invalid" in slurmctld's log; the next run's srun fails with "Invalid generic
// resource"). So the failed node is first removed from the job (as `scontrol update
// JobId= NodeList=` does), then the job is requeued held, and one update adds the node to
// its ExcNodeList and releases it: the next run cannot land on the node before Slurm
// marks it DOWN, and need not wait for that. When the failed node ran the batch script,
// Slurm requeues the job itself. A node the verdict excludes leaves the job the same way,
// though its slurmd answers (the job-level launcher takes such a node out of the job
// itself when the job can go on without it).
RunOutcome conclude_run(const JobSettings& job, std::uint32_t max_stalled_restarts,
                        const RunEnding& ending, const ShowStatus& show);

// The verdict on the culprit of a failed run (judge_culprit) against the culprits of the
// job's earlier failures: those in its restart history, or `remembered` when the job has
// no history file (the job-level launcher keeps them between its steps). An unreadable
// history counts as an empty one.
CulpritVerdict judge_run_culprit(const JobSettings& job, const std::optional<Culprit>& culprit,
                                 const std::vector<Culprit>& remembered = {});

// Under the job-level launcher: tells it what made the step fail (format_culprit),
// before the step's ranks end. Failures are logged.
void report_culprit(const JobSettings& job, const Culprit& culprit);

// Under the job-level launcher: tells it how rank 0 ended a run that did not fail
// (format_run_end), before the step's ranks end. Failures are logged.
void report_run_end(const JobSettings& job, int code);

// Under the job-level launcher: tells it that the step lost its ranks on `node`
// (JobSettings::launcher_*), so that it can end the step without waiting for srun.
// Failures are logged: the launcher then learns of the node when Slurm does.
void report_lost_node(const JobSettings& job, const std::string& node);

// Whether a node's slurmd answers: slurmctld does not know it as down or not
// responding, and a TCP connection to it succeeds within seconds.
bool node_answers(const std::string& node);

}  // namespace dl
