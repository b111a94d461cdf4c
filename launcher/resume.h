// Where a (re)started job resumes from: the newest checkpoint in its checkpoint
// directory that verifies, found with the checkpoint library (through dlrun_ckpt.so, see
// ckpt_module.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/deadline.h"
#include "launcher/restart.h"
#include "launcher/run_settings.h"
#include "launcher/slurm_job.h"

namespace dl {

// "quick", "metadata" or "full"; throws dl::InputError naming the option otherwise.
CheckLevel parse_check_level(const std::string& option, const std::string& text);

struct ResumePoint {
  std::string path;   // the step directory
  std::int64_t step;  // its step
  WallClock::time_point written;
  std::string writer_job;  // "4711", "100_3"; empty when the manifest does not say
  std::string writer;      // "job 4711 (user alice, uid 1000)"
};

// nullopt when `ckpt_dir` holds no checkpoint that passes `level` (or does not exist).
// Skipped newer checkpoints are logged as warnings. Throws dl::SystemError when the
// checkpoint library cannot be loaded or the directory cannot be read.
std::optional<ResumePoint> newest_checkpoint(const std::string& ckpt_dir, CheckLevel level);

// What rank 0 needs to choose the checkpoint a run resumes.
struct ResumeRequest {
  std::string ckpt_dir;  // the job's own checkpoint directory
  CheckLevel check = CheckLevel::full;
  CkptDirKind kind = CkptDirKind::chosen;
  std::string own_job;      // "4711" or "100_3"; empty outside Slurm
  std::string resume_from;  // --dl-resume-from: a checkpoint directory, or empty
  // Where its comment is read (the newest checkpoint an earlier run reported); nullopt
  // outside Slurm.
  std::optional<slurm::JobRef> job;
};

// The newest checkpoint of `r.ckpt_dir` this job may resume (see resume_refusal; a
// refused one is logged as a warning), else the newest in `r.resume_from`. Logs an error
// when the job's records (its restart history, its job comment) have a newer checkpoint
// than the one it resumes; the run still starts (see missing_checkpoint_warning). Throws
// dl::SystemError when `r.resume_from` is needed and holds no checkpoint that verifies.
std::optional<ResumePoint> choose_resume(const ResumeRequest& r);

}  // namespace dl
