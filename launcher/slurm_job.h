// What dlrun asks of Slurm, through libslurm (containers often lack the scontrol
// binary): the job's end time, state and comment; requeue; a new comment. Each call is
// checked once and its error carries slurm_strerror.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/deadline.h"
#include "launcher/job_info.h"
#include "launcher/jobs_view.h"
#include "launcher/status.h"

namespace dl::slurm {

// slurm_init once per process (reads SLURM_CONF like every Slurm command).
void init();

JobInfo load_job(const JobRef& job);

// Requeues this job (array task); `hold` keeps it pending until `scontrol release`.
void requeue(const JobRef& job, bool hold);

// Whether slurmctld itself requeues a batch job preempted with a GraceTime that ends
// within it (PreemptMode=REQUEUE, --requeue). Since 24.05 it does, and a job that then
// requeues itself is requeued once more at the end of its next run: its "preempted in
// the grace time" flag outlives the requeue (GRACE_PREEMPT, _job_requeue_op in
// src/slurmctld/job_mgr.c). Before 24.05 such a job ended FAILED.
bool slurm_requeues_job_ending_in_grace();

// Where a node's slurmd listens, and whether slurmctld already knows it does not respond.
struct NodeInfo {
  std::string address;  // NodeAddr: a host name or an address
  std::uint16_t port = 0;
  bool not_responding = false;  // DOWN, or flagged NOT_RESPONDING
};
NodeInfo load_node(const std::string& node);

// Shrinks a running job to its `nodes` without `node` (a node that has failed).
void remove_node(const JobRef& job, const std::string& nodes, const std::string& node);

// Adds `node` (a node that has failed, which slurmctld may not know yet) to a pending
// job's ExcNodeList and, with `release`, releases the job in the same update: the job
// was requeued held so that no run could be placed on the node before it is excluded.
// Throws when the update fails (the job then stays held).
void exclude_failed_node(const JobRef& job, const std::string& node, bool release);

// The host names of a node list ("n[1-3],n5" -> n1 n2 n3 n5), in its order.
std::vector<std::string> expand_nodes(const std::string& nodes);
// Whether slurmctld keeps no accounting (AccountingStorageType=accounting_storage/none):
// then Slurm 22.05 refuses every update of a job that was resized ("the DB index is
// being set"), each after a 5 s wait, for the rest of the job.
bool resized_jobs_frozen();
// Sends `sig` to every step of the job but not to its batch script (scancel --signal
// without --batch, from the batch script itself).
void signal_steps(const JobRef& job, int sig);
// False when the job has already ended (a cancelled job's comment cannot change).
bool set_comment(const JobRef& job, const std::string& comment);
// Whether this dlrun puts its status line in the job comment (on by default). Every user
// can read a job's comment unless the site sets PrivateData=jobs, so a job may keep it
// to its output (dlrun --status-comment=off, DL_STATUS_COMMENT=off).
void set_status_comments(bool on);
bool status_comments();
// Puts `status` (a format_status line) in place of the status part of the job's
// comment, after what job_submit/dl wrote there. Errors are logged as warnings; a job
// that has ended keeps its comment.
void post_status(const JobRef& job, const std::string& status);
// The status line of a phase alone ("REQUEUED: preempted"), logged, and posted when
// `job` is given.
void show_phase(const std::optional<JobRef>& job, JobPhase phase, const std::string& detail);

// Every job slurmctld knows (of user `uid` only, when given), as dl-jobs shows them:
// the state and pending reason in Slurm's words, the expected start of a pending job
// (the backfill scheduler's estimate; none before its first pass).
std::vector<JobRow> list_jobs(std::optional<std::uint32_t> uid);

}  // namespace dl::slurm
