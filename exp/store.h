// The experiment database (SQLite), written only by the reader that merges the journals
// (exp/journal.h). One file per experiment, <root>/<experiment>/experiment.db, in the
// default rollback-journal mode (WAL needs shared memory, which NFS does not have);
// `sqlite3` opens it. Merges are serialized by a lock file created with O_EXCL, so two
// `dl-exp` on two hosts never write the database at once.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace dl::exp {

struct MergeStats {
  std::size_t journals = 0;
  std::size_t records = 0;  // new records taken in
  std::size_t corrupt = 0;  // bad lines skipped in this merge
};

class Store {
 public:
  // Opens (creating if missing) the database of `experiment` under `root`.
  Store(const std::string& root, const std::string& experiment);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Takes in what the journals gained since the last merge, in one transaction.
  // Idempotent: a record is keyed on (writer, seq), and each journal's consumed offset
  // is kept, so re-merging reads only new bytes and never duplicates.
  MergeStats merge();

  const std::string& experiment() const { return experiment_; }
  const std::string& path() const { return path_; }

  // The trials with hparams, state, job_id, restarts, started, updated, steps (the
  // newest metric step), last metrics.
  nlohmann::json trials();
  bool has_trial(const std::string& trial);
  // Metric rows {trial, step, name, value, time}, by trial, name, step: each step once,
  // as the newest run reported it. A run that resumed from step S recomputed the steps
  // after S, so what earlier runs reported past S is superseded (kept in the database,
  // with superseded = 1, as history).
  nlohmann::json metrics(const std::optional<std::string>& trial);
  nlohmann::json checkpoints(const std::optional<std::string>& trial);
  nlohmann::json events(const std::optional<std::string>& trial);
  nlohmann::json logs(const std::optional<std::string>& trial);

 private:
  void exec(const std::string& sql);
  void add_missing_columns();
  std::string root_;
  std::string experiment_;
  std::string path_;
  sqlite3* db_ = nullptr;
};

// The experiments under `root` (directories holding a journals/ folder).
std::vector<std::string> list_experiments(const std::string& root);

}  // namespace dl::exp
