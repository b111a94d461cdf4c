// slurmstepd (remote context). init_post_opt runs once per step on every node as
// root; task_init runs in every task, as the job's user, just before exec; exit runs
// once per step on every node as root, after the step's tasks are gone.
#include <fmt/format.h>

#include <optional>
#include <string>

#include "config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/private_dir.h"
#include "core/spec.h"
#include "core/step_files.h"
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
  // As root, before any task runs and before anything is created: the path must not
  // pass through another user's or a shared-writable directory (see private_dir.h).
  check_private_path(spec.ckpt_dir, step().ckpt_roots, uid);
  if (!spec.resume_from.empty()) check_private_path(spec.resume_from, step().ckpt_roots, uid);
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

int slurmstepd_task_init(spank_t sp) {
  // Logged by the guard in the task, whose stderr is the job's: the user sees why.
  if (!step().refusal.empty()) throw InputError(step().refusal);
  // A job that asked for nothing of slurm-dl stays an ordinary Slurm job: no DL_*
  // variable, no directory.
  if (!step().spec) return 0;
  // Tasks and dlrun use this to know the plugin is active on this node.
  set_task_env(sp, "DL_SPANK_VERSION", PACKAGE_VERSION);
  const Spec& spec = *step().spec;
  try {
    ensure_private_dir(spec.ckpt_dir, step().ckpt_roots);
  } catch (const std::exception& e) {
    throw InputError(std::string("couldn't prepare the checkpoint directory: ") + e.what());
  }
  for (const auto& [name, value] : spec.to_env()) set_task_env(sp, name, value);
  if (step().default_dir) set_task_env(sp, "DL_CKPT_DIR_DEFAULT", "1");
  log(LogLevel::debug, "checkpoint directory {} ready, {} DL_* variables set", spec.ckpt_dir,
      spec.to_env().size());
  return 0;
}

// A dlrun killed with SIGKILL leaves its channel file behind: remove the step's, in the
// directories dlrun may have used, once nothing of the step can use them any more.
// For every step, with or without --dl-* options (dlrun runs in plain steps too).
int slurmstepd_exit(spank_t sp) {
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
  if (step_id >= 0xfffffff0) return 0;
  std::uint32_t array_job_id = 0;
  std::uint32_t array_task_id = kNoVal;
  const bool array = spank_get_item(sp, S_JOB_ARRAY_ID, &array_job_id) == ESPANK_SUCCESS &&
                     spank_get_item(sp, S_JOB_ARRAY_TASK_ID, &array_task_id) == ESPANK_SUCCESS &&
                     array_job_id != 0 && array_task_id != kNoVal;
  const std::string prefix = channel_file_prefix(
      array ? fmt::format("{}_{}", array_job_id, array_task_id) : std::to_string(job_id),
      std::to_string(step_id));
  // As channel_file.cc: /dev/shm, else the task's TMPDIR, else /tmp.
  const std::optional<std::string> tmpdir = job_getenv(sp, "TMPDIR");
  for (const std::string& dir :
       {std::string("/dev/shm"), tmpdir && tmpdir->rfind('/', 0) == 0 ? *tmpdir : "/tmp"}) {
    try {
      if (const std::size_t n = remove_channel_files(dir, prefix, uid)) {
        log(LogLevel::verbose, "removed {} channel file(s) {}* left in {}", n, prefix, dir);
      }
    } catch (const std::exception& e) {
      log(LogLevel::error, "couldn't remove the channel files {}* in {}: {}", prefix, dir,
          e.what());
    }
  }
  return 0;
}

}  // namespace dl::spank
