#include "exp/store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>

#include "core/error.h"
#include "core/private_dir.h"
#include "core/sysio.h"
#include "core/user_db.h"
#include "exp/journal.h"
#include "exp/lock_file.h"
#include "exp/writer.h"

namespace dl::exp {

using namespace dl::sys;  // files: join, open_file, list_dir, ...
namespace {

constexpr std::chrono::seconds kLockWait{30};

// One prepared statement, finalized on destruction; every sqlite3 call checked once here.
class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s_, nullptr) != SQLITE_OK) {
      throw SystemError("sqlite: couldn't prepare '" + sql + "': " + sqlite3_errmsg(db));
    }
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, const std::string& v) {
    check(sqlite3_bind_text(s_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& bind(int i, std::int64_t v) {
    check(sqlite3_bind_int64(s_, i, v));
    return *this;
  }
  Stmt& bind(int i, double v) {
    check(sqlite3_bind_double(s_, i, v));
    return *this;
  }
  Stmt& bind_null(int i) {
    check(sqlite3_bind_null(s_, i));
    return *this;
  }
  // True while there is a row.
  bool step() {
    const int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw SystemError(std::string("sqlite: ") + sqlite3_errmsg(db_));
  }
  void run() {
    step();
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  std::string text(int i) {
    const auto* p = sqlite3_column_text(s_, i);
    return p ? reinterpret_cast<const char*>(p) : "";
  }
  std::int64_t int64(int i) { return sqlite3_column_int64(s_, i); }
  double real(int i) { return sqlite3_column_double(s_, i); }
  bool is_null(int i) { return sqlite3_column_type(s_, i) == SQLITE_NULL; }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) throw SystemError(std::string("sqlite: bind: ") + sqlite3_errmsg(db_));
  }
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
};

// The merge lock, <experiment>/merge.lock: a holder on another host (or a live one on
// this host) is waited for, then reported.
LockFile merge_lock(const std::string& dir) {
  const auto limit = std::chrono::steady_clock::now() + kLockWait;
  return LockFile(join(dir, "merge.lock"), [&](const std::string& holder) {
    if (std::chrono::steady_clock::now() > limit) {
      throw SystemError("couldn't merge: " + join(dir, "merge.lock") + " is held by '" + holder +
                        "' (remove it if that process is gone)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  });
}

const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS experiments(id TEXT PRIMARY KEY, created REAL);
CREATE TABLE IF NOT EXISTS trials(id TEXT PRIMARY KEY, hparams TEXT, state TEXT,
  job_id TEXT, restarts INTEGER NOT NULL DEFAULT 0, started REAL, updated REAL);
CREATE TABLE IF NOT EXISTS metrics(trial TEXT NOT NULL, step INTEGER NOT NULL,
  name TEXT NOT NULL, value REAL NOT NULL, time REAL, writer TEXT NOT NULL,
  seq INTEGER NOT NULL, superseded INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(writer, seq, name));
CREATE INDEX IF NOT EXISTS metrics_by_trial ON metrics(trial, name, step);
CREATE TABLE IF NOT EXISTS checkpoints(trial TEXT NOT NULL, step INTEGER NOT NULL,
  path TEXT, verified INTEGER NOT NULL DEFAULT 0, time REAL, writer TEXT NOT NULL,
  seq INTEGER NOT NULL, PRIMARY KEY(writer, seq));
CREATE TABLE IF NOT EXISTS events(trial TEXT NOT NULL, time REAL, kind TEXT NOT NULL,
  reason TEXT, step INTEGER, restarts INTEGER, writer TEXT NOT NULL, seq INTEGER NOT NULL,
  resume_step INTEGER, PRIMARY KEY(writer, seq));
CREATE TABLE IF NOT EXISTS logs(trial TEXT NOT NULL, path TEXT NOT NULL,
  PRIMARY KEY(trial, path));
CREATE TABLE IF NOT EXISTS journals(writer TEXT PRIMARY KEY, offset INTEGER NOT NULL,
  records INTEGER NOT NULL, corrupt INTEGER NOT NULL);
)sql";

// Columns added since the first release, for databases made before them.
const struct {
  const char* table;
  const char* column;
  const char* declaration;
} kAddedColumns[] = {
    {"metrics", "superseded", "INTEGER NOT NULL DEFAULT 0"},
    {"events", "resume_step", "INTEGER"},
};

// A trial's metric rows that a later report or run replaced: another report of the same
// metric at the same step, newer; or a run that started later from a step before it
// (it recomputed the step). Where a run started from: what dlrun recorded, else, for
// runs recorded before that, the step of the checkpoint its reason names; unknown for
// a program that keeps its own checkpoints (then only the newer reports count).
const char* kSupersede = R"sql(
UPDATE metrics SET superseded = (
  EXISTS (SELECT 1 FROM metrics n WHERE n.trial = metrics.trial AND n.name = metrics.name
          AND n.step = metrics.step
          AND (n.time, n.writer, n.seq) > (metrics.time, metrics.writer, metrics.seq))
  OR EXISTS (SELECT 1 FROM events e WHERE e.trial = metrics.trial AND e.kind = 'run_started'
          AND e.time > metrics.time
          AND metrics.step > coalesce(e.resume_step,
              (SELECT c.step FROM checkpoints c WHERE c.trial = e.trial
               AND e.reason = 'resumed from ' || c.path))))
WHERE trial = ?1 OR ?1 IS NULL
)sql";

std::string str_or(const nlohmann::json& j, const char* key, const std::string& fallback = {}) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

std::optional<std::int64_t> int_of(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<std::int64_t>();
}

double time_of(const nlohmann::json& j) {
  const auto it = j.find("time");
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

}  // namespace

Store::Store(const std::string& root, const std::string& experiment)
    : root_(root), experiment_(experiment), path_(database_path(root, experiment)) {
  validate_name("experiment", experiment);
  // Another user who owns the root could swap the experiment's directory for their own.
  check_root(root, ::geteuid());
  const int rc =
      sqlite3_open_v2(path_.c_str(), &db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW, nullptr);
  if (rc != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw SystemError("sqlite: couldn't open " + path_ + ": " + why);
  }
  sqlite3_busy_timeout(db_, 10000);
  exec(kSchema);
  add_missing_columns();
  Stmt(db_, "INSERT OR IGNORE INTO experiments(id, created) VALUES(?, ?)")
      .bind(1, experiment)
      .bind(2, now_seconds())
      .run();
}

Store::~Store() { sqlite3_close(db_); }

void Store::add_missing_columns() {
  const auto missing = [&] {
    std::vector<std::string> out;
    for (const auto& c : kAddedColumns) {
      Stmt has(db_, "SELECT 1 FROM pragma_table_info(?) WHERE name = ?");
      has.bind(1, std::string(c.table)).bind(2, std::string(c.column));
      if (!has.step()) {
        out.push_back(
            fmt::format("ALTER TABLE {} ADD COLUMN {} {}", c.table, c.column, c.declaration));
      }
    }
    return out;
  };
  if (missing().empty()) return;
  // Another dl-exp may be adding them too: look again under the write lock.
  exec("BEGIN IMMEDIATE");
  try {
    const auto alters = missing();
    for (const auto& alter : alters) exec(alter);
    if (!alters.empty()) Stmt(db_, kSupersede).bind_null(1).run();
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

void Store::exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string why = err ? err : "unknown error";
    sqlite3_free(err);
    throw SystemError("sqlite: " + path_ + ": " + why);
  }
}

namespace {

// Why the journal `path` is not read ("" when it may be): only the caller's regular files.
std::string journal_refusal(const struct stat& st) {
  if (S_ISLNK(st.st_mode)) return "a symbolic link";
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (st.st_uid != ::geteuid()) return "belongs to " + describe_user(st.st_uid) + ", not to you";
  return "";
}

}  // namespace

MergeStats Store::merge(std::uint64_t budget) {
  MergeStats stats;
  const std::string dir = journals_dir(root_, experiment_);
  if (file_type(dir) != FileType::directory) return stats;
  const LockFile lock = merge_lock(experiment_dir(root_, experiment_));
  exec("BEGIN IMMEDIATE");
  try {
    Stmt get_offset(db_, "SELECT offset, records, corrupt FROM journals WHERE writer = ?");
    Stmt put_offset(db_, "INSERT OR REPLACE INTO journals VALUES(?, ?, ?, ?)");
    Stmt add_trial(db_,
                   "INSERT OR IGNORE INTO trials(id, state, started, updated) VALUES(?, ?, ?, ?)");
    Stmt touch_trial(db_, "UPDATE trials SET updated = max(coalesce(updated, 0), ?) WHERE id = ?");
    Stmt add_metric(db_,
                    "INSERT OR IGNORE INTO metrics(trial, step, name, value, time, writer, seq) "
                    "VALUES(?, ?, ?, ?, ?, ?, ?)");
    Stmt add_ckpt(db_, "INSERT OR IGNORE INTO checkpoints VALUES(?, ?, ?, ?, ?, ?, ?)");
    Stmt add_event(db_,
                   "INSERT OR IGNORE INTO events(trial, time, kind, reason, step, restarts, "
                   "writer, seq, resume_step) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)");
    Stmt add_log(db_, "INSERT OR IGNORE INTO logs VALUES(?, ?)");
    Stmt run_started(db_,
                     "UPDATE trials SET job_id = coalesce(?, job_id), restarts = max(restarts, ?), "
                     "hparams = coalesce(?, hparams) WHERE id = ?");
    std::set<std::string> touched;
    auto take = [&](const nlohmann::json& r, const std::string& writer) {
      const std::string trial = str_or(r, "trial");
      if (trial.empty()) return;
      const std::int64_t seq = r["seq"].get<std::int64_t>();
      const std::string kind = str_or(r, "kind");
      const double time = time_of(r);
      add_trial.bind(1, trial).bind(2, std::string("running")).bind(3, time).bind(4, time).run();
      touch_trial.bind(1, time).bind(2, trial).run();
      touched.insert(trial);
      if (kind == "metrics" && r.contains("values") && r["values"].is_object()) {
        const auto step = int_of(r, "step").value_or(0);
        for (const auto& [metric, value] : r["values"].items()) {
          if (!value.is_number()) continue;
          add_metric.bind(1, trial).bind(2, step).bind(3, metric).bind(4, value.get<double>());
          add_metric.bind(5, time).bind(6, writer).bind(7, seq).run();
        }
      } else if (kind == "checkpoint") {
        add_ckpt.bind(1, trial).bind(2, int_of(r, "step").value_or(0)).bind(3, str_or(r, "path"));
        add_ckpt.bind(4, std::int64_t{r.value("verified", false) ? 1 : 0}).bind(5, time);
        add_ckpt.bind(6, writer).bind(7, seq).run();
      } else if (kind == "event") {
        const std::string event = str_or(r, "event");
        add_event.bind(1, trial).bind(2, time).bind(3, event).bind(4, str_or(r, "reason"));
        if (auto s = int_of(r, "step")) {
          add_event.bind(5, *s);
        } else {
          add_event.bind_null(5);
        }
        if (auto n = int_of(r, "restarts")) {
          add_event.bind(6, *n);
        } else {
          add_event.bind_null(6);
        }
        if (auto from = int_of(r, "resume_step"); from && event == "run_started") {
          add_event.bind(9, *from);
        } else {
          add_event.bind_null(9);
        }
        add_event.bind(7, writer).bind(8, seq).run();
        if (event == "run_started") {
          const std::string job = str_or(r, "job_id");
          job.empty() ? run_started.bind_null(1) : run_started.bind(1, job);
          run_started.bind(2, int_of(r, "restarts").value_or(0));
          if (r.contains("hparams") && r["hparams"].is_object()) {
            run_started.bind(3, r["hparams"].dump());
          } else {
            run_started.bind_null(3);
          }
          run_started.bind(4, trial).run();
        }
      } else if (kind == "log") {
        add_log.bind(1, trial).bind(2, str_or(r, "path")).run();
      }
      ++stats.records;
    };
    for (const std::string& name : list_dir(dir)) {
      constexpr std::string_view ext = ".jsonl";
      if (name.size() <= ext.size() ||
          name.compare(name.size() - ext.size(), ext.size(), ext) != 0) {
        continue;
      }
      const std::string path = join(dir, name);
      // A FIFO would block the reader, a link could point anywhere, another user's file
      // is not this user's record: none is opened.
      struct stat st {};
      if (::lstat(path.c_str(), &st) != 0) {
        stats.skipped.push_back(path + ": " + std::strerror(errno));
        continue;
      }
      if (const std::string why = journal_refusal(st); !why.empty()) {
        stats.skipped.push_back(path + ": " + why);
        continue;
      }
      const std::string writer = name.substr(0, name.size() - ext.size());
      std::int64_t offset = 0, records = 0, corrupt = 0;
      get_offset.bind(1, writer);
      if (get_offset.step()) {
        offset = get_offset.int64(0);
        records = get_offset.int64(1);
        corrupt = get_offset.int64(2);
      }
      get_offset.run();
      ++stats.journals;
      if (st.st_size <= offset) continue;
      std::optional<Fd> fd;
      try {
        fd.emplace(open_file(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC));
      } catch (const SystemError& e) {
        stats.skipped.push_back(path + ": " + e.what());
        continue;
      }
      if (::fstat(fd->get(), &st) != 0) {
        throw SystemError("couldn't stat " + path + ": " + std::strerror(errno));
      }
      if (const std::string why = journal_refusal(st); !why.empty()) {  // swapped meanwhile
        stats.skipped.push_back(path + ": " + why);
        continue;
      }
      const std::int64_t size = st.st_size;
      while (offset < size && budget > 0) {
        // A hole (bytes never written) holds no record: a sparse file is skipped over,
        // not read.
        const off_t data = ::lseek(fd->get(), static_cast<off_t>(offset), SEEK_DATA);
        if ((data < 0 && errno == ENXIO) || data > offset) {
          ++corrupt;
          ++stats.corrupt;
          offset = data < 0 ? size : std::min<std::int64_t>(data, size);
          continue;
        }
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(
            {kMergeChunk, static_cast<std::uint64_t>(size - offset), budget}));
        std::string bytes(n, '\0');
        read_exact_at(*fd, bytes.data(), n, static_cast<std::uint64_t>(offset));
        budget -= n;
        stats.bytes += n;
        Scan scan = scan_journal(bytes);
        if (scan.consumed == 0) {
          if (n < kMergeChunk) break;  // a record still being written
          scan.consumed = n;           // no record is this long
          scan.corrupt = 1;
        }
        for (const auto& r : scan.records) take(r, writer);
        stats.corrupt += scan.corrupt;
        offset += static_cast<std::int64_t>(scan.consumed);
        records += static_cast<std::int64_t>(scan.records.size());
        corrupt += static_cast<std::int64_t>(scan.corrupt);
      }
      if (offset < size && budget == 0) stats.more = true;
      put_offset.bind(1, writer).bind(2, offset).bind(3, records).bind(4, corrupt).run();
    }
    // A trial's state is that of its newest state-changing event, whatever order the
    // journals were merged in.
    Stmt events_of(db_, "SELECT kind FROM events WHERE trial = ? ORDER BY time DESC, seq DESC");
    Stmt set_state(db_, "UPDATE trials SET state = ? WHERE id = ?");
    for (const auto& trial : touched) {
      events_of.bind(1, trial);
      while (events_of.step()) {
        if (auto state = state_after(events_of.text(0))) {
          set_state.bind(1, *state).bind(2, trial).run();
          break;
        }
      }
      events_of.run();
    }
    Stmt supersede(db_, kSupersede);
    for (const auto& trial : touched) supersede.bind(1, trial).run();
    // dlrun verifies a checkpoint before it resumes from it (exp/trial.cc's reason).
    exec(
        "UPDATE checkpoints SET verified = 1 WHERE verified = 0 AND EXISTS (SELECT 1 FROM "
        "events e WHERE e.trial = checkpoints.trial AND e.kind = 'run_started' AND "
        "e.reason = 'resumed from ' || checkpoints.path)");
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  return stats;
}

bool Store::has_trial(const std::string& trial) {
  Stmt s(db_, "SELECT 1 FROM trials WHERE id = ?");
  s.bind(1, trial);
  return s.step();
}

nlohmann::json Store::trials() {
  nlohmann::json out = nlohmann::json::array();
  Stmt s(
      db_,
      "SELECT id, hparams, state, job_id, restarts, started, updated, "
      "(SELECT max(step) FROM metrics m WHERE m.trial = t.id AND NOT m.superseded) FROM trials t "
      "ORDER BY started, id");
  Stmt last(db_,
            "SELECT name, value FROM metrics WHERE trial = ? AND step = ? AND NOT superseded "
            "ORDER BY name");
  while (s.step()) {
    nlohmann::json t;
    t["id"] = s.text(0);
    t["hparams"] = s.is_null(1) ? nlohmann::json::object() : nlohmann::json::parse(s.text(1));
    t["state"] = s.text(2);
    t["job_id"] = s.is_null(3) ? nlohmann::json(nullptr) : nlohmann::json(s.text(3));
    t["restarts"] = s.int64(4);
    t["started"] = s.real(5);
    t["updated"] = s.real(6);
    t["metrics"] = nlohmann::json::object();
    if (s.is_null(7)) {
      t["step"] = nullptr;
    } else {
      t["step"] = s.int64(7);
      last.bind(1, t["id"].get<std::string>()).bind(2, s.int64(7));
      while (last.step()) t["metrics"][last.text(0)] = last.real(1);
      last.run();
    }
    out.push_back(std::move(t));
  }
  return out;
}

namespace {
void bind_trial(Stmt& s, const std::optional<std::string>& trial) {
  if (trial) {
    s.bind(1, *trial);
  } else {
    s.bind_null(1);
  }
}
}  // namespace

nlohmann::json Store::metrics(const std::optional<std::string>& trial) {
  nlohmann::json out = nlohmann::json::array();
  Stmt s(db_,
         "SELECT trial, step, name, value, time FROM metrics WHERE (?1 IS NULL OR trial = ?1) "
         "AND NOT superseded ORDER BY trial, name, step, time");
  bind_trial(s, trial);
  while (s.step()) {
    out.push_back({{"trial", s.text(0)},
                   {"step", s.int64(1)},
                   {"name", s.text(2)},
                   {"value", s.real(3)},
                   {"time", s.real(4)}});
  }
  return out;
}

nlohmann::json Store::checkpoints(const std::optional<std::string>& trial) {
  nlohmann::json out = nlohmann::json::array();
  Stmt s(db_,
         "SELECT trial, step, path, verified, time FROM checkpoints WHERE ?1 IS NULL OR trial = ?1 "
         "ORDER BY trial, step, time");
  bind_trial(s, trial);
  while (s.step()) {
    out.push_back({{"trial", s.text(0)},
                   {"step", s.int64(1)},
                   {"path", s.text(2)},
                   {"verified", s.int64(3) != 0},
                   {"time", s.real(4)}});
  }
  return out;
}

nlohmann::json Store::events(const std::optional<std::string>& trial) {
  nlohmann::json out = nlohmann::json::array();
  Stmt s(db_,
         "SELECT trial, time, kind, reason, step, restarts FROM events WHERE ?1 IS NULL OR "
         "trial = ?1 ORDER BY time, writer, seq");
  bind_trial(s, trial);
  while (s.step()) {
    nlohmann::json e = {
        {"trial", s.text(0)}, {"time", s.real(1)}, {"kind", s.text(2)}, {"reason", s.text(3)}};
    if (!s.is_null(4)) e["step"] = s.int64(4);
    if (!s.is_null(5)) e["restarts"] = s.int64(5);
    out.push_back(std::move(e));
  }
  return out;
}

nlohmann::json Store::logs(const std::optional<std::string>& trial) {
  nlohmann::json out = nlohmann::json::array();
  Stmt s(db_, "SELECT trial, path FROM logs WHERE ?1 IS NULL OR trial = ?1 ORDER BY trial, path");
  bind_trial(s, trial);
  while (s.step()) out.push_back({{"trial", s.text(0)}, {"path", s.text(1)}});
  return out;
}

std::optional<std::string> not_yours(const std::string& root, const std::string& name) {
  struct stat st {};
  const std::string dir = join(root, name);
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::nullopt;
    return fmt::format("is not readable ({})", std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return std::nullopt;
  if (st.st_uid != ::geteuid()) return "belongs to " + describe_user(st.st_uid);
  if (::access(dir.c_str(), R_OK | X_OK) != 0) {
    return fmt::format("is not readable ({})", std::strerror(errno));
  }
  return std::nullopt;
}

std::vector<std::string> list_experiments(const std::string& root,
                                          std::vector<std::string>* skipped) {
  std::vector<std::string> out;
  check_root(root, ::geteuid());
  if (file_type(root) != FileType::directory) return out;
  for (const auto& name : list_dir(root)) {
    if (name.empty() || name[0] == '.') continue;
    if (not_yours(root, name)) {
      if (skipped) skipped->push_back(name);
      continue;
    }
    if (file_type(join(join(root, name), "journals")) == FileType::directory) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  if (skipped) std::sort(skipped->begin(), skipped->end());
  return out;
}

}  // namespace dl::exp
