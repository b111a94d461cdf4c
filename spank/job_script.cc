// The job prolog and epilog (S_CTX_JOB_SCRIPT), as root in the process slurmd starts for
// them: with gpu_metrics=DIR, the record of which job and user hold which GPUs of this
// node, for dl-gpu-metrics (core/gpu_owner.h), and with drain_after the removal of the
// job's record of this node (core/drain.h). Every job that has GPUs here gets one,
// whether it uses --dl-* options or not. A failure is logged and the job runs on: a GPU
// without a record is only left out of the metrics, not worth draining the node for. So
// is a bad plugstack argument: every step of the job fails on it anyway, with its message.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/drain.h"
#include "core/error.h"
#include "core/gpu_owner.h"
#include "core/log.h"
#include "core/sysio.h"
#include "spank/contexts.h"
#include "spank/state.h"

namespace dl::spank {
namespace {

// The record directory: made when missing, root's (this process's user's), writable by no
// one else, opened without following a link; readable by all (the records name no more
// than squeue shows).
sys::Fd open_gpu_metrics_dir() {
  const std::string& path = site_config().gpu_metrics_dir;
  struct stat st {};
  sys::Fd dir = open_plugin_dir(path, 0755, st);
  if (st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
    throw SystemError(fmt::format(
        "gpu_metrics directory {} must belong to uid {} and be writable by no one else (it "
        "has uid {}, mode {:o}): not recording the job's GPUs",
        path, geteuid(), st.st_uid, st.st_mode & 07777));
  }
  return dir;
}

GpuOwner this_job(spank_t sp) {
  GpuOwner o;
  uint32_t job = 0;
  uid_t uid = 0;
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS) {
    throw SystemError("the job's id or user is unknown");
  }
  o.job = job;
  o.uid = uid;
  const char* node = std::getenv("SLURMD_NODENAME");
  o.node = node && *node ? node : sys::hostname();
  return o;
}

void log_failure(const char* hook, const std::exception& e) {
  slurm_error("dl: %s: couldn't %s the job's GPU record: %s", hook,
              std::strcmp(hook, "slurm_spank_job_prolog") == 0 ? "write" : "remove", e.what());
}

// The plugstack arguments; false, with one line in slurmd's log, when they do not parse.
bool load_config(const char* hook, int argc, char** argv) {
  try {
    load_site_config(argc, argv);
    return true;
  } catch (const InputError& e) {
    slurm_error("dl: %s: %s", hook, e.what());
    return false;
  }
}

}  // namespace

int job_prolog(spank_t sp, int argc, char** argv) {
  if (!load_config("slurm_spank_job_prolog", argc, argv)) return 0;
  if (site_config().gpu_metrics_dir.empty()) return 0;
  try {
    const char* gpus = std::getenv("SLURM_JOB_GPUS");
    if (!gpus || !*gpus) return 0;
    GpuOwner o = this_job(sp);
    o.gpus = parse_gpu_index_list(gpus);
    o.user = user_name_of(o.uid);
    // Slurm's prolog environment; empty without accounting.
    if (const char* account = std::getenv("SLURM_JOB_ACCOUNT")) o.account = account;
    // Checked as the exporter will check it: a record it would refuse is not written.
    const std::string text = format_gpu_owner(o);
    parse_gpu_owner(text);
    sys::write_file_durably_at(open_gpu_metrics_dir(), gpu_owner_file_name(o), text);
  } catch (const std::exception& e) {
    log_failure("slurm_spank_job_prolog", e);
  }
  return 0;
}

int job_epilog(spank_t sp, int argc, char** argv) {
  if (!load_config("slurm_spank_job_epilog", argc, argv)) return 0;
  if (!site_config().gpu_metrics_dir.empty()) {
    try {
      sys::remove_file_at(open_gpu_metrics_dir(), gpu_owner_file_name(this_job(sp)));
    } catch (const std::exception& e) {
      log_failure("slurm_spank_job_epilog", e);
    }
  }
  // drain_after's record of the job on this node: nothing reads it once the job is over.
  if (site_config().drain_after > 0) {
    try {
      const GpuOwner o = this_job(sp);
      const std::string name = node_record_name(o.node, o.job);
      const sys::Fd dir = open_drain_state_dir();
      if (sys::file_type_at(dir, name) != sys::FileType::missing) {
        sys::remove_file_at(dir, name);
        log(LogLevel::verbose, "removed the drain_after record {} of the ended job {}", name,
            o.job);
      }
    } catch (const std::exception& e) {
      slurm_error("dl: slurm_spank_job_epilog: couldn't remove the job's drain_after record: %s",
                  e.what());
    }
  }
  return 0;
}

}  // namespace dl::spank
