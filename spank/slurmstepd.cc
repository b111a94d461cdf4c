// slurmstepd (remote context). init_post_opt runs once per step on every node as
// root; task_init runs in every task, as the job's user, just before exec; task_exit runs
// as root as each task's exit status is collected; exit runs once per step on every node
// as root, after the step's tasks are gone.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "config.h"
#include "core/drain.h"
#include "core/error.h"
#include "core/log.h"
#include "core/net.h"
#include "core/node_down.h"
#include "core/private_dir.h"
#include "core/process.h"
#include "core/spec.h"
#include "core/step_files.h"
#include "core/sysio.h"
#include "spank/contexts.h"
#include "spank/state.h"

namespace dl::spank {
namespace {

// Slurm's NO_VAL: S_JOB_ARRAY_TASK_ID of a job that is not an array task.
constexpr std::uint32_t kNoVal = 0xfffffffe;

struct StepState {
  // Why this step must not run (the checks below failed), or empty. Refused in
  // task_init: a failing init_post_opt makes slurmd drain the node ("batch job complete
  // failure"), so another user who plants a link in a job's path would take nodes out.
  std::string refusal;
  std::optional<Spec> spec;
  bool default_dir = false;             // the plugin chose spec->ckpt_dir
  std::vector<std::string> ckpt_roots;  // with "~" expanded
  uid_t uid = 0;                        // the job's user
  // drain_after: one of the step's tasks on this node exited with kExitCulpritStep.
  bool culprit = false;
  // down_failed_batch_host: the job's batch host was checked for this step on this node.
  bool batch_host_checked = false;
};

StepState& step() {
  static StepState s;
  return s;
}

std::optional<std::string> job_getenv(spank_t sp, const std::string& name) {
  std::string buf(4096, '\0');
  const spank_err_t rc = spank_getenv(sp, name.c_str(), buf.data(), static_cast<int>(buf.size()));
  if (rc != ESPANK_SUCCESS) return std::nullopt;
  buf.resize(buf.find('\0'));
  return buf;
}

void set_task_env(spank_t sp, const std::string& name, const std::string& value) {
  const spank_err_t rc = spank_setenv(sp, name.c_str(), value.c_str(), 1);
  if (rc != ESPANK_SUCCESS) {
    throw SystemError("couldn't set " + name + " for the tasks: " + spank_strerror(rc));
  }
}

}  // namespace

namespace {

void check_step(spank_t sp) {
  uid_t uid = 0;
  if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS) {
    throw SystemError("couldn't get the job's uid");
  }
  const std::string home = home_of(uid);
  // The same checks as at submit time, on the options forwarded to this step; they
  // only fail here if the job's environment was changed after submission.
  step().spec = make_spec(
      raw_options(), [sp](const std::string& name) { return job_getenv(sp, name); }, site_config(),
      home);
  if (!step().spec) return;
  Spec& spec = *step().spec;
  const std::string user = user_name_of(uid);
  step().default_dir = spec.ckpt_dir.empty();
  if (spec.ckpt_dir.empty()) {
    std::uint32_t job_id = 0;
    std::uint32_t array_job_id = 0;
    std::uint32_t array_task_id = kNoVal;
    if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS) {
      throw SystemError("couldn't get the job id");
    }
    // 0 and NO_VAL: not an array task.
    const bool array = spank_get_item(sp, S_JOB_ARRAY_ID, &array_job_id) == ESPANK_SUCCESS &&
                       spank_get_item(sp, S_JOB_ARRAY_TASK_ID, &array_task_id) == ESPANK_SUCCESS &&
                       array_job_id != 0 && array_task_id != kNoVal;
    spec.ckpt_dir =
        default_ckpt_dir(site_config(), user,
                         ckpt_job_key(job_id, array ? std::optional(array_job_id) : std::nullopt,
                                      array ? std::optional(array_task_id) : std::nullopt));
  }
  if (!spec.resume_from.empty()) {
    spec.resume_from = resolve_resume_from(site_config(), user, spec.resume_from);
  }
  step().ckpt_roots.clear();
  for (const auto& root : site_config().effective_ckpt_roots()) {
    step().ckpt_roots.push_back(root == "~" ? home : root);
  }
  step().uid = uid;
}

}  // namespace

int slurmstepd_post_opt(spank_t sp) {
  step().refusal.clear();
  try {
    check_step(sp);
  } catch (const std::exception& e) {
    step().refusal = e.what();
    // In slurmd's log, for the site; the job's own output gets it from task_init.
    log(LogLevel::error, "{}", step().refusal);
  }
  return 0;
}

namespace {

// Step ids above this are Slurm's own (batch script, extern, interactive, pending).
constexpr std::uint32_t kMaxStepId = 0xfffffff0;

// Whether this step's outcome counts for drain_after: a step of a --dl-* job whose
// checks passed, started by dlrun's job-level launcher (DL_JOB_LAUNCHER=1: only there
// does dlrun mark the culprit, so a program of `srun dlrun` that exits 77 for its own
// reasons does not count), not the batch script (the launcher) or the extern step.
bool drain_watched(spank_t sp) {
  if (site_config().drain_after == 0 || !step().spec || !step().refusal.empty()) return false;
  std::uint32_t id = kMaxStepId;
  if (spank_get_item(sp, S_JOB_STEPID, &id) != ESPANK_SUCCESS || id >= kMaxStepId) return false;
  return job_getenv(sp, "DL_JOB_LAUNCHER") == std::optional<std::string>("1");
}

// Runs Slurm's `tool` (scontrol, sinfo, squeue, from slurm_bindir) with `args` (no shell, a clean
// environment: PATH and slurmstepd's own SLURM_CONF), its output to `out` when given; waits at most
// 20 s. Returns its exit code.
int run_slurm_tool(const std::string& tool, const std::vector<std::string>& args,
                   std::string* out) {
  CommandSpec spec;
  spec.argv = {slurm_tool_path(site_config(), tool)};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  if (const char* conf = std::getenv("SLURM_CONF")) {
    spec.env.push_back(std::string("SLURM_CONF=") + conf);
  }
  spec.clean_env = true;
  spec.merge_stderr = true;
  spec.timeout = std::chrono::seconds(20);
  // One byte over the bound read: a reply that long is known to be cut.
  spec.max_output = kMaxDrainedNodesReply + 1;
  // Started from a step's slurmstepd, the tool is one of its descendants: while Slurm
  // kills the step (an MPI program that lost its peers aborts it), proctrack/linuxproc's
  // SIGKILLs can reach the tool too. Killed so, it runs again, a second later, 3 times
  // at most.
  CommandResult r;
  for (int tries = 1;; ++tries) {
    r = run_command(spec);
    if (r.timed_out || !WIFSIGNALED(r.status) || WTERMSIG(r.status) != SIGKILL || tries == 3) break;
    log(LogLevel::verbose, "{} was killed (the step is being killed): running it again", tool);
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (out) *out = r.out;
  return exit_code_of(r.status);
}

void record_step(spank_t sp) {
  std::uint32_t job = 0;
  std::uint32_t step_id = 0;
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS) {
    throw SystemError("couldn't get the job and step ids");
  }
  // Set by slurmstepd itself (its own node name), over anything in the job's environment.
  const auto node = job_getenv(sp, "SLURMD_NODENAME");
  if (!node) throw SystemError("no SLURMD_NODENAME in the step's environment");
  const std::string name = node_record_name(*node, job);
  const sys::Fd dir = open_drain_state_dir();
  NodeRecord record;
  if (sys::file_type_at(dir, name) != sys::FileType::missing) {
    record = decode_node_record(sys::read_file_at(dir, name, 4096));
  }
  const DrainDecision d =
      judge_step(record, job, step_id, step().culprit, site_config().drain_after);
  if (!step().culprit && record.culprit_steps.empty()) return;  // nothing to keep
  sys::write_file_durably_at(dir, name, encode_node_record(d.record));
  if (!d.drain) {
    if (step().culprit) {
      log(LogLevel::info, "job {} step {}: this node ({}) was the culprit of the step's failure",
          job, step_id, *node);
    }
    return;
  }
  // At most one node per job: none drained for it yet by another node's plugin. The
  // nodes of a step that all reach the count at once (a job whose every task exits with
  // the culprit's status) check one after the other, a second apart by their index in
  // the step (up to 30 s).
  std::uint32_t index = 0;
  if (spank_get_item(sp, S_JOB_NODEID, &index) == ESPANK_SUCCESS && index > 0) {
    std::this_thread::sleep_for(std::chrono::seconds(std::min<std::uint32_t>(index, 30)));
  }
  std::string drained;
  const int listed = run_slurm_tool("sinfo", {"-h", "-N", "-t", "drain", "-o", "%N|%E"}, &drained);
  const DrainCheck check = check_drained_nodes(job, listed, drained);
  if (!check.may_drain) {
    log(LogLevel::info, "not draining {} for job {}: {}", *node, job, check.why_not);
    return;
  }
  const int rc = run_slurm_tool(
      "scontrol", {"update", "NodeName=" + *node, "State=DRAIN", "Reason=" + d.reason}, nullptr);
  if (rc != 0) {
    throw SystemError(
        fmt::format("scontrol update NodeName={} State=DRAIN failed (exit {})", *node, rc));
  }
  log(LogLevel::info, "drained node {}: {}", *node, d.reason);
}

// The node of a sinfo line, for `node` (a plain host name).
NodeLine load_node_line(const std::string& node) {
  std::string out;
  const int rc = run_slurm_tool(
      "sinfo", {"-h", "-N", "-n", node, "-O", "NodeAddr:|,Port:|,StateComplete:|"}, &out);
  if (rc != 0) throw SystemError(fmt::format("sinfo -n {} failed (exit {})", node, rc));
  return parse_node_line(out);
}

// down_failed_batch_host: a task of this step exited with kExitLostLeader (its dlrun lost
// rank 0 on another node) or was killed. That proves nothing (a program can exit with
// it, a step is killed for many reasons); what counts is slurmctld's word for the job's
// batch host and whether its slurmd answers this node: three connections in a row
// refused or unanswered, half a second apart (core/node_down.h), mark it DOWN, with a
// reason naming the job, the node and the evidence. Slurm then requeues the job at once
// instead of after SlurmdTimeout.
void check_batch_host(spank_t sp) {
  std::uint32_t job = 0;
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) {
    throw SystemError("couldn't get the job id");
  }
  // Set by slurmstepd itself (its own node name), over anything in the job's environment.
  const auto self = job_getenv(sp, "SLURMD_NODENAME");
  if (!self) throw SystemError("no SLURMD_NODENAME in the step's environment");
  // squeue's field alone: scontrol's whole record also holds what the user chose (the
  // job's name, comment, paths), which could spell another node's name.
  std::string info;
  if (const int rc =
          run_slurm_tool("squeue", {"-h", "-j", std::to_string(job), "-O", "BatchHost:|"}, &info);
      rc != 0) {
    throw SystemError(fmt::format("squeue -j {} failed (exit {})", job, rc));
  }
  const std::string host = info.substr(0, info.find('|'));
  // Not a batch job (salloc): no batch host to lose.
  if (host.empty() || host == "n/a" || info.find('|') == std::string::npos) return;
  node_record_name(host, job);  // a plain host name, or InputError
  if (host == *self) return;
  NodeLine node = load_node_line(host);
  if (known_down(node)) {
    log(LogLevel::info, "job {}: batch host {} is DOWN already", job, host);
    return;
  }
  std::string why;
  std::vector<net::Reach> probes;
  ProbeVerdict verdict = ProbeVerdict::undecided;
  while (verdict == ProbeVerdict::undecided &&
         probes.size() < static_cast<std::size_t>(kMaxProbes)) {
    if (!probes.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    // Long enough for a host that is gone to be reported unreachable (ARP gives up
    // after about 3 s).
    probes.push_back(net::tcp_reach(node.address, node.port, std::chrono::seconds(4), why));
    verdict = judge_probes(probes);
  }
  if (verdict == ProbeVerdict::alive) {
    log(LogLevel::info,
        "job {}: a task lost rank 0 or was killed, but batch host {}'s slurmd answers: not "
        "marking it DOWN",
        job, host);
    return;
  }
  if (verdict == ProbeVerdict::undecided) {
    log(LogLevel::info,
        "job {}: a task lost rank 0 or was killed, and batch host {}'s slurmd neither answers "
        "nor refuses ({}): leaving it to Slurm",
        job, host, why);
    return;
  }
  // Another node of the job may have marked it in the meantime.
  node = load_node_line(host);
  if (known_down(node)) return;
  const std::string reason = batch_host_down_reason(job, node, *self, kDeadAfterRefusals);
  if (const int rc = run_slurm_tool(
          "scontrol", {"update", "NodeName=" + host, "State=DOWN", "Reason=" + reason}, nullptr);
      rc != 0) {
    throw SystemError(
        fmt::format("scontrol update NodeName={} State=DOWN failed (exit {})", host, rc));
  }
  log(LogLevel::info, "marked node {} DOWN ({}): {}", host, why, reason);
}

}  // namespace

int slurmstepd_task_exit(spank_t sp) {
  int status = 0;
  if (spank_get_item(sp, S_TASK_EXIT_STATUS, &status) != ESPANK_SUCCESS) return 0;
  const bool exited = WIFEXITED(status);
  if (exited && WEXITSTATUS(status) == kExitCulpritStep && drain_watched(sp)) {
    step().culprit = true;
  }
  // A rank that lost rank 0 on another node exits with kExitLostLeader, unless
  // slurmstepd kills it first: an MPI program that lost its peers aborts, and Slurm's
  // PMIx plugin then kills every task of the step (SIGKILL). Either starts the check.
  const bool lost_leader = exited && WEXITSTATUS(status) == kExitLostLeader;
  const bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  // At the first such task, not at the step's end: slurmstepd first tells srun of every
  // task's end, and srun ran on the batch host (a dead host costs MessageTimeout).
  if ((lost_leader || killed) && site_config().down_failed_batch_host && step().spec &&
      step().refusal.empty() && !step().batch_host_checked) {
    step().batch_host_checked = true;
    try {
      check_batch_host(sp);
    } catch (const std::exception& e) {
      // In slurmd's log; a failure here must not fail the step.
      log(LogLevel::error, "down_failed_batch_host: {}", e.what());
    }
  }
  return 0;
}

int slurmstepd_task_init(spank_t sp) {
  // Logged by the guard in the task, whose stderr is the job's: the user sees why.
  if (!step().refusal.empty()) throw InputError(step().refusal);
  // A job that asked for nothing of slurm-dl stays an ordinary Slurm job: no DL_*
  // variable, no directory.
  if (!step().spec) return 0;
  const Spec& spec = *step().spec;
  // As the job's user, never as root: NFS with root_squash refuses root the user's
  // private directories. The path must not pass through another user's or a
  // shared-writable directory (see private_dir.h), checked before anything is created.
  check_private_path(spec.ckpt_dir, step().ckpt_roots, step().uid);
  if (!spec.resume_from.empty()) {
    check_private_path(spec.resume_from, step().ckpt_roots, step().uid);
  }
  // Tasks and dlrun use this to know the plugin is active on this node.
  set_task_env(sp, "DL_SPANK_VERSION", PACKAGE_VERSION);
  try {
    ensure_private_dir(spec.ckpt_dir, step().ckpt_roots);
  } catch (const std::exception& e) {
    throw InputError(std::string("couldn't prepare the checkpoint directory: ") + e.what());
  }
  for (const auto& [name, value] : spec.to_env()) set_task_env(sp, name, value);
  if (step().default_dir) set_task_env(sp, "DL_CKPT_DIR_DEFAULT", "1");
  // dlrun marks the culprit of a failed step by its exit status (see core/drain.h).
  if (site_config().drain_after > 0) {
    set_task_env(sp, "DL_CULPRIT_EXIT", std::to_string(kExitCulpritStep));
  }
  // dlrun marks the loss of rank 0 on another node by its exit status (core/node_down.h).
  if (site_config().down_failed_batch_host) {
    set_task_env(sp, "DL_LOST_LEADER_EXIT", std::to_string(kExitLostLeader));
  }
  log(LogLevel::debug, "checkpoint directory {} ready, {} DL_* variables set", spec.ckpt_dir,
      spec.to_env().size());
  return 0;
}

namespace {

// A dlrun killed with SIGKILL leaves its channel file behind: remove the step's, in the
// directories dlrun may have used, once nothing of the step can use them any more.
// For every step, with or without --dl-* options (dlrun runs in plain steps too).
void remove_left_channel_files(spank_t sp) {
  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  uid_t uid = 0;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS) {
    throw SystemError("couldn't get the job id, step id and uid");
  }
  // The batch, extern and interactive steps (ids from 0xfffffff0 up) run no dlrun rank:
  // ranks need SLURM_STEP_ID, which only real steps have.
  if (step_id >= 0xfffffff0) return;
  std::uint32_t array_job_id = 0;
  std::uint32_t array_task_id = kNoVal;
  const bool array = spank_get_item(sp, S_JOB_ARRAY_ID, &array_job_id) == ESPANK_SUCCESS &&
                     spank_get_item(sp, S_JOB_ARRAY_TASK_ID, &array_task_id) == ESPANK_SUCCESS &&
                     array_job_id != 0 && array_task_id != kNoVal;
  const std::string prefix = channel_file_prefix(
      array ? fmt::format("{}_{}", array_job_id, array_task_id) : std::to_string(job_id),
      std::to_string(step_id));
  // Where channel_file.cc puts them: /dev/shm, else the task's TMPDIR, else /tmp. Not in
  // the task's TMPDIR: as root there, a user's FUSE mount or a dead NFS server could hang
  // slurmstepd (and root_squash refuses it); a file left there is in the user's own
  // directory.
  for (const char* dir : {"/dev/shm", "/tmp"}) {
    try {
      if (const std::size_t n = remove_channel_files(dir, prefix, uid)) {
        log(LogLevel::verbose, "removed {} channel file(s) {}* left in {}", n, prefix, dir);
      }
    } catch (const std::exception& e) {
      log(LogLevel::error, "couldn't remove the channel files {}* in {}: {}", prefix, dir,
          e.what());
    }
  }
}

}  // namespace

int slurmstepd_exit(spank_t sp) {
  if (drain_watched(sp)) {
    try {
      record_step(sp);
    } catch (const std::exception& e) {
      // In slurmd's log; a failure here must not fail the step or drain anything.
      log(LogLevel::error, "drain_after: {}", e.what());
    }
  }
  remove_left_channel_files(sp);
  return 0;
}

}  // namespace dl::spank
