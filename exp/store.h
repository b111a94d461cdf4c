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
  std::size_t corrupt = 0;  // bad lines (and holes, lines over kMergeChunk) skipped
  std::uint64_t bytes = 0;  // journal bytes read
  bool more = false;        // the byte budget ran out before every journal was read
  // Journals not read, as "<path>: why": not a regular file (a FIFO, a link), not the
  // caller's, not readable.
  std::vector<std::string> skipped;
};

// Journals are read in pieces of this size: a record (one line) longer than this is
// skipped as corrupt, so no journal, however large or sparse, is held whole.
inline constexpr std::size_t kMergeChunk = 4u << 20;
inline constexpr std::uint64_t kNoBudget = ~std::uint64_t{0};

class Store {
 public:
  // Opens (creating if missing) the database of `experiment` under `root`. A root that
  // belongs to another user than root or the caller is an InputError (core/private_dir.h).
  Store(const std::string& root, const std::string& experiment);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Takes in what the journals gained since the last merge, in one transaction, reading
  // at most `budget` bytes (the rest waits for the next merge: `more`). Idempotent: a
  // record is keyed on (writer, seq), and each journal's consumed offset is kept, so
  // re-merging reads only new bytes and never duplicates. Only the caller's regular
  // files are read, opened without blocking and without following links.
  MergeStats merge(std::uint64_t budget = kNoBudget);

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

// Why dl-exp does not read the experiment directory `<root>/<name>`: "belongs to NAME
// (uid N)" when another user owns it, "is not readable (...)" when it cannot be
// examined; nullopt when it is the caller's (or missing, or not a directory).
std::optional<std::string> not_yours(const std::string& root, const std::string& name);

// The caller's experiments under `root` (their directories holding a journals/ folder).
// Other users' directories and unreadable ones are left out, their names added to
// `skipped` (a shared root holds everyone's experiments). A root of another user than
// root or the caller is an InputError, as for Store.
std::vector<std::string> list_experiments(const std::string& root,
                                          std::vector<std::string>* skipped = nullptr);

}  // namespace dl::exp
