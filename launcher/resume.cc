#include "launcher/resume.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <climits>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "launcher/ckpt_module.h"
#include "launcher/launch.h"
#include "launcher/restart_state.h"
#include "launcher/slurm_job.h"

namespace dl {
namespace {

constexpr const char* kModule = "dlrun_ckpt.so";

std::string own_directory() {
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return ".";
  const std::string path(exe, static_cast<std::size_t>(n));
  return path.substr(0, path.rfind('/'));
}

void forward_log(int level, const char* message) {
  log(static_cast<LogLevel>(level), "{}", message);
}

// The module stays loaded for the rest of the process: HDF5 registers exit handlers that
// must find their code when the process ends.
dlrun_ckpt_newest_fn module_entry() {
  static std::once_flag once;
  static dlrun_ckpt_newest_fn entry = nullptr;
  static std::string why;
  std::call_once(once, [] {
    // Next to dlrun in a build tree (libtool's .libs), else where `make install` put it
    // (below the same root as dlrun first: a staged DESTDIR install).
    const std::vector<std::string> candidates =
        module_paths(own_directory(), DL_BINDIR, DL_PKGLIBDIR, kModule);
    for (const auto& path : candidates) {
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!handle) {
        why += fmt::format("{}{}", why.empty() ? "" : "; ", dlerror());
        continue;
      }
      entry = reinterpret_cast<dlrun_ckpt_newest_fn>(dlsym(handle, "dlrun_ckpt_newest"));
      if (entry) return;
      why += fmt::format("{}{}: no dlrun_ckpt_newest", why.empty() ? "" : "; ", path);
      dlclose(handle);
    }
  });
  if (!entry) throw SystemError(fmt::format("couldn't load the checkpoint library: {}", why));
  return entry;
}

// What the job's own records say its newest checkpoint was (restart.h).
std::optional<std::int64_t> job_records_checkpoint(const ResumeRequest& r) {
  RestartHistory history;
  try {
    history = read_history(history_path(r.ckpt_dir, r.own_job));
  } catch (const std::exception& e) {
    log(LogLevel::warning, "{}", e.what());
  }
  std::string comment;
  if (r.job) {
    try {
      comment = slurm::load_job(*r.job).comment;
    } catch (const std::exception& e) {
      log(LogLevel::verbose, "{} (the job comment's checkpoint step is not known)", e.what());
    }
  }
  return recorded_checkpoint(history, comment);
}

}  // namespace

CheckLevel parse_check_level(const std::string& option, const std::string& text) {
  if (text == "quick") return CheckLevel::quick;
  if (text == "metadata") return CheckLevel::metadata;
  if (text == "full") return CheckLevel::full;
  throw InputError(fmt::format("{}={}: expected quick, metadata or full", option, text));
}

std::optional<ResumePoint> newest_checkpoint(const std::string& ckpt_dir, CheckLevel level) {
  const dlrun_ckpt_newest_fn newest = module_entry();
  char path[PATH_MAX + 1] = {};
  char error[1024] = {};
  std::int64_t step = -1;
  std::int64_t written = 0;
  char writer_job[64] = {};
  char writer[512] = {};
  const int rc =
      newest(ckpt_dir.c_str(), static_cast<int>(level), forward_log, path, sizeof path, &step,
             &written, writer_job, sizeof writer_job, writer, sizeof writer, error, sizeof error);
  if (rc < 0) {
    throw SystemError(fmt::format("couldn't look for checkpoints in {}: {}", ckpt_dir, error));
  }
  if (rc == 0) return std::nullopt;
  return ResumePoint{path, step, WallClock::from_time_t(written), writer_job, writer};
}

std::optional<ResumePoint> choose_resume(const ResumeRequest& r) {
  std::optional<ResumePoint> found = newest_checkpoint(r.ckpt_dir, r.check);
  if (found) {
    const std::string refusal =
        resume_refusal({found->path, found->step, found->writer_job, found->writer}, r.kind,
                       r.own_job, r.ckpt_dir);
    if (!refusal.empty()) {
      log(LogLevel::warning, "{}", refusal);
      found.reset();
    }
  }
  const std::optional<std::int64_t> own_newest = found ? std::optional(found->step) : std::nullopt;
  if (!found && !r.resume_from.empty()) {
    found = newest_checkpoint(r.resume_from, r.check);
    if (!found) {
      throw SystemError(fmt::format(
          "--dl-resume-from={}: no checkpoint there that verifies, and {} has none of this job's",
          r.resume_from, r.ckpt_dir));
    }
  }
  if (!r.own_job.empty()) {
    const std::string missing =
        missing_checkpoint_warning(job_records_checkpoint(r), r.own_job, r.ckpt_dir, own_newest,
                                   found ? std::optional(found->step) : std::nullopt);
    if (!missing.empty()) log(LogLevel::error, "{}", missing);
  }
  return found;
}

}  // namespace dl
