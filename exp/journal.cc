#include "exp/journal.h"

#include <map>

#include "client/journal.h"
#include "core/error.h"
#include "core/sysio.h"

namespace dl::exp {

using namespace dl::sys;  // files: join, open_file, list_dir, ...

void validate_name(const std::string& what, const std::string& name) {
  bool ok = !name.empty() && name.size() <= 128 && name[0] != '.';
  for (const unsigned char c : name) {
    if (!(std::isalnum(c) || c == '_' || c == '.' || c == '-')) ok = false;
  }
  if (!ok) {
    throw InputError(what + " '" + name +
                     "': expected 1 to 128 letters, digits or _.- not starting with '.'");
  }
}

std::string experiments_root(const Getenv& env) {
  if (auto root = env("DL_EXP_ROOT"); root && !root->empty()) {
    if ((*root)[0] != '/') {
      throw InputError("DL_EXP_ROOT=" + *root + ": expected an absolute path");
    }
    return *root;
  }
  const auto home = env("HOME");
  if (!home || home->empty() || (*home)[0] != '/') {
    throw InputError("neither DL_EXP_ROOT nor HOME is set to an absolute path");
  }
  return join(*home, ".slurm-dl/experiments");
}

std::optional<std::string> trial_from_env(const Getenv& env) {
  if (auto t = env("DL_TRIAL"); t && !t->empty()) return t;
  auto array = env("SLURM_ARRAY_JOB_ID");
  auto task = env("SLURM_ARRAY_TASK_ID");
  if (array && task && !array->empty() && !task->empty()) return *array + "_" + *task;
  if (auto job = env("SLURM_JOB_ID"); job && !job->empty()) return job;
  return std::nullopt;
}

std::string experiment_dir(const std::string& root, const std::string& experiment) {
  return join(root, experiment);
}
std::string journals_dir(const std::string& root, const std::string& experiment) {
  return join(experiment_dir(root, experiment), "journals");
}
std::string database_path(const std::string& root, const std::string& experiment) {
  return join(experiment_dir(root, experiment), "experiment.db");
}

Scan scan_journal(std::string_view bytes) {
  Scan scan;
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    const std::size_t nl = bytes.find('\n', pos);
    if (nl == std::string_view::npos) break;
    const std::string_view line = bytes.substr(pos, nl - pos);
    pos = nl + 1;
    scan.consumed = pos;
    std::string_view body;
    if (!journal::unframe(line, &body)) {
      ++scan.corrupt;
      continue;
    }
    auto j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("seq") || !j["seq"].is_number_integer()) {
      ++scan.corrupt;
      continue;
    }
    scan.records.push_back(std::move(j));
  }
  return scan;
}

std::optional<std::string> state_after(const std::string& kind) {
  // held: dlrun held the job (restarts without progress); paused: `dl-search pause`;
  // waiting: dl-search's trial at a rung, waiting for promotion. Journals written before
  // "waiting" existed record that as "paused", and read back as paused.
  static const std::map<std::string, std::string> states = {
      {"run_started", "running"}, {"stop_requested", "running"},
      {"restarting", "running"},  {"requeued", "pending"},
      {"held", "held"},           {"completed", "completed"},
      {"failed", "failed"},       {"stopped", "stopped"},
      {"submitted", "pending"},   {"paused", "paused"},
      {"waiting", "waiting"},     {"continued", "running"},  // continued: to the next rung
  };
  const auto it = states.find(kind);
  if (it == states.end()) return std::nullopt;
  return it->second;
}

const std::vector<std::string>& trial_states() {
  static const std::vector<std::string> states = {"completed", "stopped", "failed", "running",
                                                  "pending",   "waiting", "paused", "held"};
  return states;
}

}  // namespace dl::exp
