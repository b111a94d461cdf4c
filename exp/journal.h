// Experiment journals, the pure part: names, where an experiment lives, reading the
// records back, and what a trial's events make of its state.
//
// Why journals: an experiment lives on the shared file system where the jobs'
// checkpoints are, and many nodes write to it at once. SQLite's locking is not safe
// there (NFS), so no process but the reader writes the database: every writer (a job's
// rank-0 program for metrics, its rank-0 dlrun for events) appends framed records
// (client/journal.h) to a journal file of its own, and `dl-exp` merges all journals into
// the experiment's SQLite database, keyed on (writer, seq) so re-merging never
// duplicates. This is optuna's journal storage, with one file per writer instead of a
// shared, locked one.
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dl::exp {

using Getenv = std::function<std::optional<std::string>(const std::string&)>;

// Experiment and trial names: 1 to 128 of letters, digits and "_.-", not starting with
// "." (they are directory and file names). Throws dl::InputError naming `what`.
void validate_name(const std::string& what, const std::string& name);

// The root of all experiments: DL_EXP_ROOT, else $HOME/.slurm-dl/experiments.
std::string experiments_root(const Getenv& env);

// The trial of this job: DL_TRIAL, else SLURM_ARRAY_JOB_ID_SLURM_ARRAY_TASK_ID for an
// array task, else SLURM_JOB_ID; nullopt without any.
std::optional<std::string> trial_from_env(const Getenv& env);

// Layout under the root: <root>/<experiment>/journals/*.jsonl and
// <root>/<experiment>/experiment.db.
std::string experiment_dir(const std::string& root, const std::string& experiment);
std::string journals_dir(const std::string& root, const std::string& experiment);
std::string database_path(const std::string& root, const std::string& experiment);

struct Scan {
  std::vector<nlohmann::json> records;  // complete, checksummed records, in order
  std::size_t consumed = 0;             // bytes up to the end of the last complete line
  std::size_t corrupt = 0;              // complete lines whose checksum or JSON is bad (skipped)
};

// Reads journal bytes: every newline-terminated line whose checksum matches and whose
// JSON is an object with a "seq" counts; a trailing line without its newline (a record
// still being written, or torn by a crash) is left unconsumed.
Scan scan_journal(std::string_view bytes);

// The state a trial is in after an event of `kind` (completed, stopped, failed, running,
// pending, waiting, paused, held), or nullopt when the event does not change it (a
// checkpoint).
std::optional<std::string> state_after(const std::string& kind);

// The states `dl-exp show` reports, in the order of the interface.
const std::vector<std::string>& trial_states();

}  // namespace dl::exp
