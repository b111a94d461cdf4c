#include "exp/search_journal.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "core/error.h"
#include "core/sysio.h"
#include "core/user_db.h"
#include "exp/journal.h"
#include "exp/writer.h"

namespace dl::exp::search {

using namespace dl::sys;  // files: join, open_file, list_dir, ...
using nlohmann::json;

// The journal's names of the searcher's events.
NLOHMANN_JSON_SERIALIZE_ENUM(Event::Kind, {{Event::Kind::created, "created"},
                                           {Event::Kind::started, "started"},
                                           {Event::Kind::reported, "reported"},
                                           {Event::Kind::finished, "finished"},
                                           {Event::Kind::failed, "failed"},
                                           {Event::Kind::stopped, "stopped"},
                                           {Event::Kind::paused, "paused"},
                                           {Event::Kind::held, "held"},
                                           {Event::Kind::resumed, "resumed"},
                                           {Event::Kind::rung_done, "rung_done"}})

namespace {

// ---- journals ----

// The journals named <stem>.*.jsonl, oldest first (by the nanoseconds in their names).
std::vector<std::string> journals_of(const std::string& dir, const std::string& stem) {
  std::vector<std::pair<std::string, std::string>> found;
  if (file_type(dir) != FileType::directory) return {};
  for (const auto& name : list_dir(dir)) {
    if (name.rfind(stem + ".", 0) != 0 || name.size() < 6 ||
        name.compare(name.size() - 6, 6, ".jsonl") != 0) {
      continue;
    }
    const std::string base = name.substr(0, name.size() - 6);
    const std::string ns = base.substr(base.rfind('.') + 1);
    found.emplace_back(std::string(20 - std::min<std::size_t>(20, ns.size()), '0') + ns, name);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (const auto& [key, name] : found) out.push_back(join(dir, name));
  return out;
}

std::vector<json> records_of(const std::string& path) {
  Fd fd = open_file(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  return scan_journal(read_fd(fd, std::size_t{1} << 30)).records;
}

Event event_of(const json& j) {
  Event e;
  e.kind = j.at("kind").get<Event::Kind>();
  // nlohmann maps a name it does not know to the first kind.
  if (json(e.kind) != j.at("kind")) {
    throw std::out_of_range(fmt::format("unknown event kind {}", j.at("kind").dump()));
  }
  e.trial = j.at("trial").get<std::string>();
  e.step = j.value("step", std::int64_t{0});
  e.value = j.value("value", 0.0);
  e.reason = j.value("reason", std::string());
  e.in_job = j.value("in_job", false);
  return e;
}

// Only the user who owns the experiment's directory may pause, resume or stop it (in a
// shared root, 1777, everyone else's requests are refused here, before anything is read).
void check_owner(const std::string& root, const std::string& experiment) {
  const std::string dir = experiment_dir(root, experiment);
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return;  // load_experiment names it
    throw SystemError(fmt::format("couldn't stat {}: {}", dir, std::strerror(errno)));
  }
  if (st.st_uid == ::geteuid()) return;
  throw InputError(fmt::format(
      "experiment '{}' in {} belongs to {}; only its owner can pause, resume or stop it",
      experiment, root, describe_user(st.st_uid)));
}

}  // namespace

json event_json(const Event& e) {
  json j = {{"kind", e.kind},
            {"trial", e.trial},
            {"step", e.step},
            {"value", e.value},
            {"reason", e.reason}};
  if (e.in_job) j["in_job"] = true;
  return j;
}

Controls read_controls(const std::string& dir) {
  Controls c;
  double newest = -1;
  std::map<std::string, double> newest_of;
  for (const auto& path : journals_of(dir, "control")) {
    for (const auto& rec : records_of(path)) {
      if (rec.value("kind", std::string()) != "control") continue;
      const double t = rec.value("time", 0.0);
      std::string what = rec.value("what", std::string("running"));
      if (what == "resume") what = "running";
      const std::string trial = rec.value("trial", std::string());
      if (trial.empty()) {
        if (t >= newest) {
          newest = t;
          c.experiment = what;
        }
        continue;
      }
      auto& now = c.trials[trial];
      if (now == "stopped") continue;
      if (what == "stopped" || newest_of.count(trial) == 0 || t >= newest_of[trial]) {
        now = what;
        newest_of[trial] = t;
      }
    }
  }
  return c;
}

std::string spec_path(const std::string& root, const std::string& experiment) {
  return join(experiment_dir(root, experiment), "search.json");
}

void create_experiment(const std::string& root, const Experiment& e) {
  const std::string journals = ensure_journals_dir(root, e.name);
  (void)journals;
  const std::string path = spec_path(root, e.name);
  const std::string text = to_json(e).dump(2) + "\n";
  if (file_type(path) == FileType::file) {
    if (read_file(path, 1 << 20) == text) return;
    throw InputError(fmt::format(
        "experiment '{}' exists under {} with another search ({}); give this one another name",
        e.name, root, path));
  }
  if (file_type(journals_dir(root, e.name)) == FileType::directory &&
      !list_dir(journals_dir(root, e.name)).empty()) {
    throw InputError(fmt::format(
        "experiment '{}' exists under {} and is not a search; give this one another name", e.name,
        root));
  }
  write_file_durably(path, text);
}

Experiment load_experiment(const std::string& root, const std::string& experiment) {
  validate_name("experiment", experiment);
  const std::string path = spec_path(root, experiment);
  if (file_type(path) != FileType::file) {
    throw InputError(fmt::format("unknown search '{}' (no {})", experiment, path));
  }
  return experiment_from_json(json::parse(read_file(path, 1 << 20)));
}

Replay replay(const std::string& root, const Experiment& e, Searcher& searcher) {
  Replay r;
  const std::string dir = journals_dir(root, e.name);
  for (auto& op : searcher.start()) r.ops.push_back(op);
  for (const auto& path : journals_of(dir, "search")) {
    for (const auto& rec : records_of(path)) {
      const std::string what = rec.value("rec", std::string());
      if (what == "events") {
        for (const auto& ev : rec.at("events")) {
          for (auto& op : searcher.handle(event_of(ev))) r.ops.push_back(op);
        }
      } else if (what == "intent") {
        r.intent[rec.at("op").get<std::int64_t>()] = rec.value("time", 0.0);
        if (rec.contains("continue_job")) {
          r.in_job_intent[rec.at("op").get<std::int64_t>()] =
              rec.at("continue_job").get<std::string>();
        }
      } else if (what == "submitted") {
        r.jobs[rec.at("op").get<std::int64_t>()] = rec.at("job").get<std::string>();
      } else if (what == "done") {
        r.done[rec.at("op").get<std::int64_t>()] = true;
      } else if (what == "finished") {
        r.finished = true;
      }
    }
  }
  const Controls c = read_controls(dir);
  r.control = c.experiment;
  r.trial_control = c.trials;
  return r;
}

void request(const std::string& root, const std::string& experiment, const std::string& what,
             const std::string& trial) {
  validate_name("experiment", experiment);
  check_owner(root, experiment);
  const Experiment e = load_experiment(root, experiment);
  json rec = {{"kind", "control"}, {"what", what}, {"time", now_seconds()}};
  if (!trial.empty()) {
    const std::string verb = what == "paused" ? "pause" : what == "resume" ? "resume" : "stop";
    Searcher s(e.searcher);
    const Replay r = replay(root, e, s);
    const Trial* t = s.find(trial);
    if (t == nullptr) {
      std::string known;
      for (const auto& x : s.trials()) known += (known.empty() ? "" : ", ") + x.id;
      throw InputError(fmt::format("{}: unknown trial '{}' in search '{}' (trials: {})", verb,
                                   trial, experiment, known.empty() ? "none yet" : known));
    }
    if (r.finished) {
      throw InputError(fmt::format("{}: search '{}' is over; trial '{}' is {}", verb, experiment,
                                   trial, name_of(t->state)));
    }
    const auto it = r.trial_control.find(trial);
    const std::string now = it == r.trial_control.end() ? "running" : it->second;
    if (now == "stopped" || (t->state != TrialState::running && t->state != TrialState::waiting)) {
      throw InputError(fmt::format(
          "{}: trial '{}' of search '{}' is {}; only a running or waiting trial can be {}", verb,
          trial, experiment, now == "stopped" ? "stopped" : name_of(t->state),
          what == "paused"   ? "paused"
          : what == "resume" ? "resumed"
                             : "stopped"));
    }
    if (what == "resume" && now != "paused") {
      throw InputError(
          fmt::format("resume: trial '{}' of search '{}' is not paused", trial, experiment));
    }
    if (what == "paused" && now == "paused") {
      throw InputError(
          fmt::format("pause: trial '{}' of search '{}' is paused already", trial, experiment));
    }
    rec["trial"] = trial;
  }
  JournalWriter w(journals_dir(root, experiment), "control");
  w.append(rec, true);
}

json status(const std::string& root, const std::string& experiment) {
  const Experiment e = load_experiment(root, experiment);
  Searcher s(e.searcher);
  const Replay r = replay(root, e, s);
  json out = s.snapshot();
  out["experiment"] = e.name;
  out["searcher"] = to_json(e)["searcher"];
  out["control"] = r.control;
  out["finished"] = r.finished;
  for (auto& t : out["trials"]) {
    const auto it = r.trial_control.find(t["id"].get<std::string>());
    t["control"] = it == r.trial_control.end() ? "running" : it->second;
  }
  std::string lock;
  try {
    lock = read_file(join(experiment_dir(root, experiment), "search.lock"), 4096);
  } catch (const std::exception&) {
  }
  out["driver"] = lock;
  json jobs = json::object();
  for (const auto& [op, job] : r.jobs) jobs[std::to_string(op)] = job;
  out["jobs"] = jobs;
  json ops = json::array();
  for (const auto& op : r.ops) {
    ops.push_back({{"index", op.index},
                   {"kind", name_of(op.kind)},
                   {"trial", op.trial},
                   {"budget", op.budget},
                   {"rung", op.rung},
                   {"reason", op.reason},
                   {"job", r.jobs.count(op.index) ? r.jobs.at(op.index) : ""},
                   // Run in the job of the trial's previous rung (in-job continuation).
                   {"continued", r.jobs.count(op.index) && r.in_job_intent.count(op.index) &&
                                     r.in_job_intent.at(op.index) == r.jobs.at(op.index)}});
  }
  out["operations"] = ops;
  return out;
}

}  // namespace dl::exp::search
