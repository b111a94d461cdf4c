#include "launcher/job_info.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>

#include "core/parse.h"

namespace dl::slurm {
namespace {

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

}  // namespace dl::slurm
