#include "exp/trial.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "core/log.h"
#include "core/sysio.h"
#include "exp/journal.h"
#include "exp/writer.h"

namespace dl::exp {

using namespace dl::sys;  // files: join, open_file, list_dir, ...
namespace {

struct Trial {
  std::string id;
  std::unique_ptr<JournalWriter> journal;
};

Trial& current() {
  static Trial* t = new Trial;  // never destroyed: dlrun's threads may log at exit
  return *t;
}

void append(nlohmann::json record) {
  Trial& t = current();
  if (!t.journal) return;
  try {
    record["trial"] = t.id;
    record["time"] = now_seconds();
    t.journal->append(std::move(record), true);
  } catch (const std::exception& e) {
    log(LogLevel::warning, "experiment tracking: {}", e.what());
  }
}

}  // namespace

std::vector<std::string> start_trial(std::uint32_t restart_count, const RunStart& start) {
  const auto experiment = getenv_opt("DL_EXPERIMENT");
  if (!experiment || experiment->empty()) return {};
  try {
    const auto trial = trial_from_env(getenv_opt);
    if (!trial) {
      log(LogLevel::warning, "experiment tracking: no DL_TRIAL or SLURM_JOB_ID; not tracked");
      return {};
    }
    validate_name("experiment", *experiment);
    validate_name("trial", *trial);
    const std::string dir = ensure_journals_dir(experiments_root(getenv_opt), *experiment);
    Trial& t = current();
    t.id = *trial;
    t.journal = std::make_unique<JournalWriter>(dir, "run-" + *trial);
    nlohmann::json r = {
        {"kind", "event"},
        {"event", "run_started"},
        {"restarts", restart_count},
        {"reason", start.resume_from.empty() ? std::string("fresh start")
                                             : "resumed from " + start.resume_from}};
    if (auto job = getenv_opt("SLURM_JOB_ID")) r["job_id"] = *job;
    if (!start.resume_from.empty()) r["resume_from"] = start.resume_from;
    if (start.resume_step) r["resume_step"] = *start.resume_step;
    if (auto hp = getenv_opt("DL_HPARAMS")) {
      auto j = nlohmann::json::parse(*hp, nullptr, false);
      if (!j.is_discarded() && j.is_object()) r["hparams"] = j;
    }
    append(std::move(r));
    return {"DL_EXP_JOURNALS=" + dir, "DL_EXP_TRIAL=" + *trial};
  } catch (const std::exception& e) {
    log(LogLevel::warning, "experiment tracking: {}; this run is not tracked", e.what());
    current().journal.reset();
    return {};
  }
}

void record_event(const std::string& kind, const std::string& reason,
                  std::optional<std::int64_t> step) {
  nlohmann::json r = {{"kind", "event"}, {"event", kind}, {"reason", reason}};
  if (step) r["step"] = *step;
  append(std::move(r));
}

void record_metrics(std::int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  nlohmann::json v = nlohmann::json::object();
  for (const auto& [name, value] : values) v[name] = value;
  append({{"kind", "metrics"}, {"step", step}, {"values", v}});
}

void record_logs(const std::vector<std::string>& paths) {
  std::vector<std::string> seen;
  for (const auto& path : paths) {
    if (path.empty() || std::find(seen.begin(), seen.end(), path) != seen.end()) continue;
    seen.push_back(path);
    append({{"kind", "log"}, {"path", path}});
  }
}

void record_checkpoint(std::int64_t step, const std::string& ckpt_dir,
                       const std::string& step_dir) {
  const std::string path = ckpt_dir.empty() ? std::string() : join(ckpt_dir, step_dir);
  append({{"kind", "checkpoint"}, {"step", step}, {"path", path}, {"verified", false}});
}

}  // namespace dl::exp
