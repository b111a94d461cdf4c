#include "launcher/slurm_job.h"

#include <fmt/format.h>
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include <cerrno>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "core/error.h"
#include "core/parse.h"

namespace dl::slurm {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw SystemError(fmt::format("couldn't {}: {}", what, slurm_strerror(slurm_get_errno())));
}

struct JobInfoMsgDeleter {
  void operator()(job_info_msg_t* m) const noexcept { slurm_free_job_info_msg(m); }
};

std::optional<std::uint32_t> env_id(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return static_cast<std::uint32_t>(parse_uint(name, v, 1, UINT32_MAX - 1));
}

}  // namespace

std::string JobRef::to_string() const {
  if (array_job_id && array_task_id) return fmt::format("{}_{}", *array_job_id, *array_task_id);
  return std::to_string(job_id);
}

std::optional<JobRef> job_from_env() {
  const auto id = env_id("SLURM_JOB_ID");
  if (!id) return std::nullopt;
  JobRef job;
  job.job_id = *id;
  job.array_job_id = env_id("SLURM_ARRAY_JOB_ID");
  if (job.array_job_id) {
    const char* task = std::getenv("SLURM_ARRAY_TASK_ID");
    if (task && *task) {
      job.array_task_id =
          static_cast<std::uint32_t>(parse_uint("SLURM_ARRAY_TASK_ID", task, 0, UINT32_MAX - 1));
    }
  }
  return job;
}

void init() {
  static std::once_flag once;
  std::call_once(once, [] { slurm_init(nullptr); });
}

JobInfo load_job(const JobRef& job) {
  init();
  job_info_msg_t* raw = nullptr;
  if (slurm_load_job(&raw, job.job_id, SHOW_DETAIL) != SLURM_SUCCESS) {
    fail(fmt::format("load job {}", job.to_string()));
  }
  const std::unique_ptr<job_info_msg_t, JobInfoMsgDeleter> msg(raw);
  // The id of an array's last task is also the array's id: then every task comes back.
  for (std::uint32_t i = 0; i < msg->record_count; ++i) {
    const slurm_job_info_t& j = msg->job_array[i];
    if (j.job_id != job.job_id) continue;
    JobInfo info;
    // Once the job is cancelled or completing, end_time is when it ended: no deadline.
    const bool running = (j.job_state & JOB_STATE_BASE) == JOB_RUNNING;
    if (running && j.time_limit != INFINITE && j.time_limit != NO_VAL && j.end_time > 0) {
      info.end = WallClock::from_time_t(j.end_time);
    }
    info.comment = j.comment ? j.comment : "";
    info.cancelled = (j.job_state & JOB_STATE_BASE) == JOB_CANCELLED;
    info.batch = j.batch_flag != 0;
    return info;
  }
  throw SystemError(
      fmt::format("couldn't load job {}: not in slurmctld's answer", job.to_string()));
}

void requeue(const JobRef& job, bool hold) {
  init();
  // By job id, not by the array's id: slurm_requeue acts on exactly one job record.
  if (slurm_requeue(job.job_id, hold ? JOB_REQUEUE_HOLD : 0) != SLURM_SUCCESS) {
    fail(fmt::format("requeue job {}", job.to_string()));
  }
}

bool set_comment(const JobRef& job, const std::string& comment) {
  init();
  job_desc_msg_t desc;
  slurm_init_job_desc_msg(&desc);
  const std::string id = job.to_string();
  desc.job_id_str = const_cast<char*>(id.c_str());    // read only by libslurm
  desc.comment = const_cast<char*>(comment.c_str());  // read only by libslurm
  job_array_resp_msg_t* resp = nullptr;
  const int rc = slurm_update_job2(&desc, &resp);
  // With an array task's id the answer lists the task's own code.
  int task_rc = SLURM_SUCCESS;
  if (resp) {
    for (std::uint32_t i = 0; i < resp->job_array_count; ++i) {
      if (resp->error_code[i] != SLURM_SUCCESS) task_rc = static_cast<int>(resp->error_code[i]);
    }
    slurm_free_job_array_resp(resp);
  }
  if (rc != SLURM_SUCCESS && task_rc == SLURM_SUCCESS) task_rc = slurm_get_errno();
  if (task_rc == ESLURM_JOB_FINISHED || task_rc == ESLURM_ALREADY_DONE) return false;
  if (task_rc != SLURM_SUCCESS) {
    throw SystemError(
        fmt::format("couldn't update the comment of job {}: {}", id, slurm_strerror(task_rc)));
  }
  return true;
}

}  // namespace dl::slurm
