#include "exp/search_driver.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>

#include "client/decision_file.h"
#include "core/error.h"
#include "core/private_dir.h"
#include "core/sysio.h"
#include "exp/journal.h"
#include "exp/lock_file.h"
#include "exp/search_decisions.h"
#include "exp/store.h"
#include "exp/writer.h"

namespace dl::exp::search {

using namespace dl::sys;  // files: join, file_type, read_file, ...
using nlohmann::json;

namespace {

void say(const std::string& line) { std::fprintf(stderr, "dl-search: %s\n", line.c_str()); }

// ---- the driver lock: one driver per experiment ----

// A second driver of the same experiment is refused at once.
LockFile driver_lock(const std::string& dir) {
  const std::string path = join(dir, "search.lock");
  return LockFile(path, [&](const std::string& holder) {
    throw InputError(
        fmt::format("a driver of this experiment runs already ('{}' in {}; remove the file if that "
                    "process is gone)",
                    holder, path));
  });
}

std::string job_name(const std::string& experiment, const Op& op) {
  return fmt::format("dls.{}.{}.{}", experiment, op.trial, op.index);
}

bool active_state(const std::string& s) {
  static const std::set<std::string> active = {
      "PENDING",     "RUNNING",  "CONFIGURING", "COMPLETING", "REQUEUED",  "REQUEUE_HOLD",
      "REQUEUE_FED", "RESIZING", "SUSPENDED",   "SIGNALING",  "STAGE_OUT", "STOPPED"};
  return active.count(s) != 0;
}

class Driver {
 public:
  Driver(std::string root, Experiment e, DriveOptions options, SlurmJobs& slurm)
      : root_(std::move(root)),
        e_(std::move(e)),
        options_(options),
        slurm_(slurm),
        searcher_(e_.searcher),
        store_(root_, e_.name) {}

  int run() {
    const std::string dir = experiment_dir(root_, e_.name);
    const LockFile lock = driver_lock(dir);
    Replay r = replay(root_, e_, searcher_);
    ops_ = r.ops;
    intent_ = r.intent;
    jobs_ = r.jobs;
    done_ = r.done;
    in_job_intent_ = r.in_job_intent;
    if (r.finished) {
      say(fmt::format("search '{}' is over already", e_.name));
      return 0;
    }
    journal_ = std::make_unique<JournalWriter>(journals_dir(root_, e_.name), "search");
    if (e_.searcher.continue_in_job && e_.searcher.algorithm == Algorithm::asha &&
        searcher_.rungs().size() > 1) {
      decisions_ = join(dir, "continue");
      ensure_private_dir(decisions_, {root_});
    }
    say(fmt::format("search '{}': {} trial(s) so far, {} operation(s) replayed", e_.name,
                    searcher_.trials().size(), ops_.size()));
    reconcile();
    std::string control = r.control;
    for (;;) {
      const Controls now = read_controls(journals_dir(root_, e_.name));
      if (now.experiment != control) {
        control = now.experiment;
        say(fmt::format("search '{}': {}", e_.name, control));
        if (control == "paused") hold_pending(true);
        if (control == "running") hold_pending(false);
      }
      if (control == "stopped") return stop_all();
      apply_trial_controls(now.trials);
      watch(control == "running");
      // A paused search carries out only the holds of paused trials.
      if (execute(control != "running")) return 0;
      std::this_thread::sleep_for(
          std::chrono::milliseconds(static_cast<int>(options_.poll_seconds * 1000)));
    }
  }

 private:
  void append(json rec) {
    rec["time"] = now_seconds();
    journal_->append(std::move(rec), true);
  }
  // A state change for dl-exp's trial table (the store merges this journal too).
  void trial_event(const std::string& trial, const std::string& kind, const std::string& reason) {
    append({{"kind", "event"}, {"trial", trial}, {"event", kind}, {"reason", reason}});
  }

  // Whether `trial`'s runs are submitted held: paused (or pausing), or resumed and
  // waiting for a free slot.
  bool submit_held(const std::string& trial) const {
    const Trial* t = searcher_.find(trial);
    return t != nullptr &&
           (t->pause == Pause::pausing || t->pause == Pause::paused || t->pause == Pause::queued);
  }

  // Whether a held job of `trial` is one the search holds (a pause, or a release not yet
  // carried out), not dlrun's hold of a run whose restarts are used up.
  bool held_by_search(const std::string& trial) const {
    const Trial* t = searcher_.find(trial);
    if (t != nullptr && t->pause != Pause::none) return true;
    return std::any_of(ops_.begin(), ops_.end(), [&](const Op& op) {
      return op.kind == Op::Kind::release && op.trial == trial && done_.count(op.index) == 0;
    });
  }

  // The requests about single trials. Pause and resume are events for the searcher (in
  // the journal, so a restarted driver knows them), fed when the request and the
  // searcher's state differ: again after a restart, never twice. The searcher answers
  // with hold and release operations (execute) and gives the slots out. A stop is an
  // event in the journal before its job is cancelled, so a driver killed in between
  // replays the stop and cancels the job when it starts again.
  void apply_trial_controls(const std::map<std::string, std::string>& wanted) {
    for (const auto& [trial, what] : wanted) {
      const Trial* t = searcher_.find(trial);
      if (t == nullptr) continue;
      const bool live = t->state == TrialState::running || t->state == TrialState::waiting;
      if (what == "paused" && live &&
          (t->pause == Pause::none || t->pause == Pause::unpausing || t->pause == Pause::queued)) {
        // As a preemption: a running job checkpoints (Slurm's SIGTERM, dlrun's checkpoint
        // round) and is requeued held; a pending one is held; a run not yet submitted is
        // submitted held. Its slot is free once its job is held (the held event).
        feed({{Event::Kind::paused, trial, 0, 0, "dl-search pause"}});
        trial_event(trial, "paused", "dl-search pause: checkpointed and held");
        say(fmt::format("{}: paused (dl-search pause)", trial));
        continue;
      }
      if (what == "running" && live && (t->pause == Pause::pausing || t->pause == Pause::paused)) {
        feed({{Event::Kind::resumed, trial, 0, 0, "dl-search resume"}});
        const Trial* now = searcher_.find(trial);
        say(fmt::format("{}: resumed (dl-search resume){}", trial,
                        now->pause == Pause::queued
                            ? fmt::format("; waits for a free slot ({} of {} taken)",
                                          searcher_.running(), e_.searcher.max_concurrent_trials)
                            : ""));
        if (now->pause == Pause::queued) {
          trial_event(trial, "paused", "dl-search resume: waits for a free slot");
        }
        continue;
      }
      // A stop, carried out once per driver (cancelling an ended job changes nothing).
      std::string& have = trial_control_[trial];
      if (what != "stopped" || have == what) continue;
      have = what;
      if (live) {
        say(fmt::format("{}: stop requested (dl-search stop); its checkpoints are kept", trial));
        feed({{Event::Kind::stopped, trial, 0, 0, "stopped by dl-search stop"}});
      }
      act_on_jobs(trial, "cancel");
    }
  }

  // Cancels, holds or releases the active jobs of `trial`'s runs.
  void act_on_jobs(const std::string& trial, const std::string& action) {
    std::set<std::string> mine;
    for (const auto& op : ops_) {
      const auto it = jobs_.find(op.index);
      if (op.trial == trial && it != jobs_.end() && !it->second.empty()) mine.insert(it->second);
    }
    if (mine.empty()) return;
    for (const auto& entry : slurm_.queue()) {
      if (mine.count(entry.id) == 0 || !active_state(entry.state)) continue;
      std::string verb, error;
      if (action == "cancel") {
        verb = "cancel";
        error = slurm_.cancel(entry.id);
      } else if (action == "hold") {
        if (entry.state == "RUNNING" || entry.state == "CONFIGURING") {
          verb = "requeuehold";
          error = slurm_.requeue_hold(entry.id);
        } else if (entry.state == "PENDING") {
          verb = "hold";
          error = slurm_.hold(entry.id);
        }
      } else if (entry.state == "PENDING") {
        verb = "release";
        error = slurm_.release(entry.id);
      }
      if (!error.empty()) say(fmt::format("{}: {} {}: {}", trial, verb, entry.id, error));
    }
  }

  // Operations whose intent was recorded but not their job: the job is found by its
  // name in the queue, else by a run of the trial the tracking store saw start after
  // the intent; otherwise sbatch never queued it and the operation runs again.
  void reconcile() {
    std::vector<QueuedJob> q;
    bool have_queue = false;
    for (const auto& op : ops_) {
      if (intent_.count(op.index) == 0 || jobs_.count(op.index) != 0) continue;
      if (!have_queue) {
        q = slurm_.queue();
        have_queue = true;
        store_.merge();
      }
      std::string job;
      if (const auto it = in_job_intent_.find(op.index); it != in_job_intent_.end()) {
        // A continuation: its decision file says whether the job went on.
        const std::string path = decision_path(decisions_, op.trial, it->second, op.rung - 1);
        if (!decisions_.empty() && file_type(path) == FileType::file &&
            decision::parse(read_file(path, 4096))) {
          say(fmt::format("{}: job {} continues to rung {} (decided before the restart)", op.trial,
                          it->second, op.rung));
          append({{"kind", "search"},
                  {"rec", "submitted"},
                  {"op", op.index},
                  {"job", it->second},
                  {"in_job", true}});
          jobs_[op.index] = it->second;
        } else {
          intent_.erase(op.index);  // not continued (yet): execute decides again
          in_job_intent_.erase(op.index);
        }
        continue;
      }
      for (const auto& entry : q) {
        if (entry.name == job_name(e_.name, op)) job = entry.id;
      }
      if (job.empty()) {
        for (const auto& t : store_.trials()) {
          if (t["id"] == op.trial && t["job_id"].is_string() &&
              t["started"].get<double>() >= intent_[op.index] - 1) {
            for (const auto& ev : store_.events(op.trial)) {
              if (ev["kind"] == "run_started" && ev["time"].get<double>() >= intent_[op.index]) {
                job = t["job_id"].get<std::string>();
              }
            }
          }
        }
      }
      if (!job.empty()) {
        say(fmt::format("{}: found job {} of operation {} (submitted before the restart)", op.trial,
                        job, op.index));
        append({{"kind", "search"}, {"rec", "submitted"}, {"op", op.index}, {"job", job}});
        jobs_[op.index] = job;
      } else {
        intent_.erase(op.index);  // never queued: submit it
      }
    }
  }

  // The run op of a running trial (its newest create or resume).
  std::optional<Op> current_run(const std::string& trial) const {
    std::optional<Op> out;
    for (const auto& op : ops_) {
      if (op.trial == trial && (op.kind == Op::Kind::create || op.kind == Op::Kind::resume)) {
        out = op;
      }
    }
    return out;
  }

  // Carries out the operations not done yet, in order (with `only_holds`, while the
  // search is paused, only the holds of paused trials). True once the search is complete.
  bool execute(bool only_holds = false) {
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      const Op op = ops_[i];
      if (done_.count(op.index) || jobs_.count(op.index)) continue;
      if (only_holds && op.kind != Op::Kind::hold) continue;
      switch (op.kind) {
        case Op::Kind::hold:
        case Op::Kind::release:
          // Holding a held job or releasing a released one changes nothing: a driver
          // killed before the record does it again.
          act_on_jobs(op.trial, op.kind == Op::Kind::hold ? "hold" : "release");
          append({{"kind", "search"}, {"rec", "done"}, {"op", op.index}});
          done_[op.index] = true;
          if (op.kind == Op::Kind::release) {
            trial_event(op.trial, "requeued", "dl-search resume: released");
            say(fmt::format("{}: released, runs again ({})", op.trial, op.reason));
          }
          break;
        case Op::Kind::create: submit(op); break;
        case Op::Kind::resume:
          if (op.in_job) {
            continue_in_job(op);
          } else {
            submit(op);
          }
          break;
        case Op::Kind::stop:
          trial_event(op.trial, "stopped", op.reason);
          append({{"kind", "search"}, {"rec", "done"}, {"op", op.index}});
          done_[op.index] = true;
          say(fmt::format("{}: stopped ({})", op.trial, op.reason));
          break;
        case Op::Kind::complete: {
          append({{"kind", "search"}, {"rec", "done"}, {"op", op.index}});
          append({{"kind", "search"}, {"rec", "finished"}});
          done_[op.index] = true;
          const auto best = searcher_.best();
          say(fmt::format("search '{}' complete; best trial {}", e_.name, best ? *best : "none"));
          return true;
        }
      }
    }
    return false;
  }

  std::optional<std::string> newest_checkpoint_dir(const std::string& trial) {
    store_.merge();
    std::optional<std::string> dir;
    std::int64_t step = -1;
    for (const auto& c : store_.checkpoints(trial)) {
      const std::string path = c["path"].get<std::string>();
      if (!path.empty() && c["step"].get<std::int64_t>() >= step) {
        step = c["step"].get<std::int64_t>();
        dir = parent_dir(path);
      }
    }
    return dir;
  }

  void submit(const Op& op) {
    const std::string name = job_name(e_.name, op);
    std::vector<std::string> argv = {"-J", name, "--dl-experiment=" + e_.name,
                                     "--dl-trial=" + op.trial};
    if (op.kind == Op::Kind::resume) {
      // From its own newest checkpoint, never from scratch (dlrun verifies it).
      if (auto dir = newest_checkpoint_dir(op.trial)) {
        argv.push_back("--dl-resume-from=" + *dir);
      } else {
        say(fmt::format("{}: warning: no checkpoint recorded; it starts from step 0", op.trial));
      }
    }
    const bool has_output =
        std::any_of(e_.sbatch.begin(), e_.sbatch.end(), [](const std::string& o) {
          return o == "-o" || o.rfind("--output", 0) == 0 || o.rfind("-o", 0) == 0;
        });
    if (!has_output) {
      const std::string logs = join(experiment_dir(root_, e_.name), "logs");
      ensure_private_dir(logs, {root_});
      argv.push_back("--output=" + join(logs, op.trial + ".%j.out"));
    }
    // One rung's time (and the warning time) as time_min, before the file's options: a
    // --time-min there wins.
    const auto& rungs = searcher_.rungs();
    const std::int64_t first =
        op.rung > 0 && static_cast<std::size_t>(op.rung) <= rungs.size() ? rungs[op.rung - 1] : 0;
    if (const auto tm = rung_time_min(e_, op.budget - first)) {
      argv.push_back(fmt::format("--time-min={}", *tm));
      // A job that may continue to the last rung gets the time of every rung left as its
      // limit (time_min stays one rung, for backfill); a job started with less does not
      // continue when the next rung would not fit (continue_in_job).
      if (!decisions_.empty()) {
        if (const auto all = rung_time_min(e_, rungs.back() - first); all && *all > *tm) {
          argv.push_back(fmt::format("--time={}", *all));
        }
      }
    }
    for (const auto& o : e_.sbatch) argv.push_back(o);
    const bool held = submit_held(op.trial);
    if (held) argv.push_back("--hold");  // dl-search pause EXP TRIAL
    argv.push_back("--wrap");
    argv.push_back(e_.command);
    const std::vector<std::string> env = {
        "DL_HPARAMS=" + op.hparams.dump(), "DL_MAX_STEPS=" + std::to_string(op.budget),
        "DL_SEARCH_RUNG=" + std::to_string(op.rung), "DL_EXP_ROOT=" + root_};
    std::vector<std::string> env_all = env;
    if (!decisions_.empty()) {
      // The trial asks whether to continue after its rung (slurm_dl.next_max_steps()),
      // waiting a few of the driver's polls at most.
      std::string budgets;
      for (const auto b : rungs) budgets += (budgets.empty() ? "" : ",") + std::to_string(b);
      env_all.push_back("DL_SEARCH_DECISIONS=" + decisions_);
      env_all.push_back("DL_SEARCH_TRIAL=" + op.trial);
      env_all.push_back("DL_SEARCH_RUNGS=" + budgets);
      const char* wait = std::getenv("DL_SEARCH_WAIT");  // the driver's own: tests, slow sites
      env_all.push_back(
          wait != nullptr && *wait != '\0'
              ? std::string("DL_SEARCH_WAIT=") + wait
              : fmt::format("DL_SEARCH_WAIT={:.1f}", std::max(3.0, 6 * options_.poll_seconds)));
    }
    append({{"kind", "search"}, {"rec", "intent"}, {"op", op.index}, {"name", name}});
    intent_[op.index] = now_seconds();
    const Submitted submitted = slurm_.submit(argv, env_all);
    const std::string& job = submitted.id;
    if (job.empty()) {
      // Not queued: the run fails like any other, within the trial's restart budget.
      const std::string why = fmt::format("sbatch failed: {}", submitted.error);
      say(fmt::format("{}: {}", op.trial, why));
      append({{"kind", "search"}, {"rec", "submitted"}, {"op", op.index}, {"job", ""}});
      jobs_[op.index] = "";
      feed({{Event::Kind::failed, op.trial, 0, 0, why}});
      return;
    }
    append({{"kind", "search"}, {"rec", "submitted"}, {"op", op.index}, {"job", job}});
    jobs_[op.index] = job;
    trial_event(op.trial, "submitted",
                fmt::format("job {}: rung {}, {} steps ({})", job, op.rung, op.budget, op.reason));
    say(fmt::format("{}: job {} ({} to rung {}, {} steps; {}) {}{}", op.trial, job,
                    name_of(op.kind), op.rung, op.budget, op.reason, op.hparams.dump(),
                    held ? " held (paused)" : ""));
  }

  // Records the events, then hands them to the searcher (the journal first: a restart
  // replays exactly what the searcher saw).
  void feed(const std::vector<Event>& events) {
    json list = json::array();
    for (const auto& e : events) list.push_back(event_json(e));
    append({{"kind", "search"}, {"rec", "events"}, {"events", list}});
    for (const auto& e : events) {
      for (auto& op : searcher_.handle(e)) ops_.push_back(op);
    }
    for (const auto& e : events) {
      const Trial* t = searcher_.find(e.trial);
      // Pause events are told where they are fed (apply_trial_controls, watch).
      if (t == nullptr || e.kind == Event::Kind::reported || e.kind == Event::Kind::paused ||
          e.kind == Event::Kind::held || e.kind == Event::Kind::resumed) {
        continue;
      }
      if (t->state == TrialState::waiting) {
        trial_event(t->id, "waiting",
                    fmt::format("at rung {} with {}={}", t->rung, e_.searcher.metric,
                                t->rung_values.at(t->rung)));
      } else if (t->state == TrialState::completed) {
        trial_event(t->id, "completed", "full budget");
      } else if (t->state == TrialState::failed) {
        trial_event(t->id, "failed", t->reason);
      }
      if (e.kind == Event::Kind::stopped) continue;  // said by apply_trial_controls
      if (e.kind == Event::Kind::failed) {
        say(fmt::format("{}: run failed ({}); now {}", t->id, e.reason, name_of(t->state)));
      } else if (e.kind == Event::Kind::rung_done) {
        const auto it = t->rung_values.find(t->rung);
        if (it != t->rung_values.end()) {
          say(fmt::format("{}: rung {} done, {}={:.6g}; its job ends", t->id, t->rung,
                          e_.searcher.metric, it->second));
        }
      } else if (!t->rung_values.empty()) {
        const auto& [rung, value] = *t->rung_values.rbegin();
        say(fmt::format("{}: rung {} done, {}={:.6g}; now {}", t->id, rung, e_.searcher.metric,
                        value, name_of(t->state)));
      }
    }
  }

  // The outcome of every running trial's job that has ended, or that has ended its rung
  // and waits for the decision (continue_in_job; only while the search runs).
  void watch(bool search_runs) {
    std::vector<std::pair<Op, std::string>> watched;
    for (const auto& t : searcher_.trials()) {
      if (t.state != TrialState::running) continue;
      const auto op = current_run(t.id);
      if (!op || jobs_.count(op->index) == 0 || jobs_[op->index].empty()) continue;
      watched.emplace_back(*op, jobs_[op->index]);
    }
    if (watched.empty()) return;
    const auto q = slurm_.queue();
    store_.merge();
    for (const auto& [op, job] : watched) {
      std::string state = "GONE";
      bool requeue_held = false;
      for (const auto& entry : q) {
        if (entry.id == job) {
          state = entry.state;
          requeue_held = entry.requeue_held;
        }
      }
      if (active_state(state)) {
        if (state == "RUNNING" && rung_done_in_job(op, job, search_runs)) continue;
        const Trial* t = searcher_.find(op.trial);
        if (state == "PENDING" && t != nullptr &&
            (t->pause == Pause::pausing || t->pause == Pause::unpausing)) {
          // Off its GPUs: the paused trial's slot is free. After the run's own events (its
          // checkpoint, its stop): dl-exp shows it paused.
          feed({{Event::Kind::held, op.trial, 0, 0, fmt::format("job {} held", job)}});
          trial_event(op.trial, "paused", fmt::format("dl-search pause: job {} held", job));
          say(fmt::format("{}: job {} held; its slot is free", op.trial, job));
        }
        // dlrun holds a job whose restarts are used up: that run failed.
        if (state != "PENDING" || !requeue_held || held_by_search(op.trial)) continue;
        slurm_.cancel(job);
        state = "HELD";
      }
      // Finished when the metric of the budget's last step is in the store.
      std::optional<double> value;
      std::int64_t step = -1;
      for (const auto& m : store_.metrics(op.trial)) {
        if (m["name"] != e_.searcher.metric) continue;
        const auto s = m["step"].get<std::int64_t>();
        if (s < op.budget && s >= step) {
          step = s;
          value = m["value"].get<double>();
        }
      }
      if (value && step == op.budget - 1) {
        feed({{Event::Kind::reported, op.trial, step, *value, ""},
              {Event::Kind::finished, op.trial, 0, 0, ""}});
      } else {
        feed({{Event::Kind::failed, op.trial, 0, 0,
               fmt::format("job {} ended {} at step {} of {}", job, state,
                           step < 0 ? std::string("-") : std::to_string(step), op.budget)}});
      }
    }
  }

  // `op`'s job runs and its trial waits for the decision after its rung (its marker).
  // Once the rung's metric and checkpoint are in the store, the searcher's decision for
  // the slot the rung frees is taken on a copy of it: when it is to continue this trial in
  // its job (and the job's time left covers the rung), the rung's end is fed (journaled)
  // and execute carries the continuation out (continue_in_job). Otherwise the trial is
  // told "end" and its rung's value is fed (rung_done), so that it ranks the rung at once;
  // its job ends as without continuation, and that end is the rung's end, as before (the
  // slot is free once the job is off its GPUs). True once the continuation is fed.
  bool rung_done_in_job(const Op& op, const std::string& job, bool search_runs) {
    if (decisions_.empty()) return false;
    const std::string path = decision_path(decisions_, op.trial, job, op.rung);
    if (!waits_for_decision(path)) return false;  // not waiting, or decided already
    const Trial* t = searcher_.find(op.trial);
    if (!search_runs || t == nullptr || t->pause != Pause::none ||
        static_cast<std::size_t>(op.rung) + 1 >= searcher_.rungs().size()) {
      decide(path, std::string(decision::kEnd));
      return false;
    }
    std::optional<double> value;
    for (const auto& m : store_.metrics(op.trial)) {
      if (m["name"] == e_.searcher.metric && m["step"].get<std::int64_t>() == op.budget - 1) {
        value = m["value"].get<double>();
      }
    }
    bool checkpointed = false;
    for (const auto& c : store_.checkpoints(op.trial)) {
      checkpointed = checkpointed || (c["step"].get<std::int64_t>() == op.budget - 1 &&
                                      !c["path"].get<std::string>().empty());
    }
    if (!value || !checkpointed) return false;  // not in the store yet: the next poll
    const Event reported{Event::Kind::reported, op.trial, op.budget - 1, *value, ""};
    Event finished{Event::Kind::finished, op.trial, 0, 0, ""};
    finished.in_job = true;
    Searcher what_if = searcher_;
    what_if.handle(reported);
    const std::vector<Op> next = what_if.handle(finished);
    if (next.empty() || !next.front().in_job || !why_not_continue(next.front(), job).empty()) {
      // Its value ranks the rung from now on, not only once its job has ended: the trials
      // ending the same rung a moment later are decided with it.
      if (!decision::parse(decide(path, std::string(decision::kEnd)))) {
        feed({reported, {Event::Kind::rung_done, op.trial, 0, 0, ""}});
      }
      return false;
    }
    feed({reported, finished});
    return true;
  }

  // Why the job of `op`'s trial cannot run `op` (the next rung) itself: it no longer runs,
  // or its time left does not cover the rung's steps and the warning time; "" if it can.
  std::string why_not_continue(const Op& op, const std::string& job) {
    const auto& rungs = searcher_.rungs();
    const std::int64_t from = rungs[static_cast<std::size_t>(op.rung - 1)];
    const double left = slurm_.time_left(job);
    const double step =
        e_.step_seconds > 0
            ? e_.step_seconds
            : measured_step_seconds(op.trial, op.rung >= 2 ? rungs[op.rung - 2] : 0, from - 1);
    const double warning = warning_seconds(e_).value_or(-1);
    if (continuation_fits(left, op.budget - from, step, warning)) return "";
    return left < 0 ? std::string("its job is not running")
                    : fmt::format("{:.0f} s left in its job; the rung needs {:.0f} s", left,
                                  static_cast<double>(op.budget - from) * step + warning);
  }

  // Seconds per step of `trial`'s steps before `step` (from its metrics' times), or -1.
  double measured_step_seconds(const std::string& trial, std::int64_t first, std::int64_t last) {
    std::map<std::int64_t, double> at;
    for (const auto& m : store_.metrics(trial)) {
      const auto s = m["step"].get<std::int64_t>();
      if (m["name"] == e_.searcher.metric && s >= first && s <= last) at[s] = m["time"];
    }
    if (at.size() < 2) return -1;
    const auto& [s0, t0] = *at.begin();
    const auto& [s1, t1] = *at.rbegin();
    return (t1 - t0) / static_cast<double>(s1 - s0);
  }

  // Carries out a resume the searcher marked in_job: the job that ran the trial's previous
  // rung goes on if it still waits and its time limit covers the rung; otherwise the rung
  // is a new job (submit), as without continuation.
  void continue_in_job(const Op& op) {
    std::string job;
    for (const auto& o : ops_) {
      if (o.index < op.index && o.trial == op.trial &&
          (o.kind == Op::Kind::create || o.kind == Op::Kind::resume) && jobs_.count(o.index)) {
        job = jobs_[o.index];
      }
    }
    if (job.empty() || decisions_.empty() || op.rung < 1) return submit(op);
    const std::string path = decision_path(decisions_, op.trial, job, op.rung - 1);
    std::string why;
    if (file_type(path) != FileType::file) {
      why = why_not_continue(op, job);
      if (!why.empty()) decide(path, std::string(decision::kEnd));
    }
    if (why.empty()) {
      // The intent first: a driver killed after the decision finds the job by it.
      append({{"kind", "search"},
              {"rec", "intent"},
              {"op", op.index},
              {"name", job_name(e_.name, op)},
              {"continue_job", job}});
      intent_[op.index] = now_seconds();
      in_job_intent_[op.index] = job;
      if (decision::parse(decide(path, decision::continue_text(op.rung, op.budget)))) {
        append({{"kind", "search"},
                {"rec", "submitted"},
                {"op", op.index},
                {"job", job},
                {"in_job", true}});
        jobs_[op.index] = job;
        trial_event(op.trial, "continued",
                    fmt::format("job {}: rung {}, {} steps, in the same job ({})", job, op.rung,
                                op.budget, op.reason));
        say(fmt::format("{}: job {} continues (to rung {}, {} steps; {})", op.trial, job, op.rung,
                        op.budget, op.reason));
        return;
      }
      why = "the trial had stopped waiting";
    }
    say(fmt::format("{}: not continued in job {} ({}): a new job", op.trial, job, why));
    submit(op);
  }

  // Pause holds the trials' pending jobs (running ones finish their rung and give their
  // GPUs back); resume releases them.
  void hold_pending(bool hold) {
    std::set<std::string> ours;
    for (const auto& op : ops_) {
      const auto it = jobs_.find(op.index);
      // A trial paused by itself (or waiting for a slot) stays held when the search
      // resumes.
      if (it != jobs_.end() && (hold || !submit_held(op.trial))) ours.insert(it->second);
    }
    for (const auto& entry : slurm_.queue()) {
      if (ours.count(entry.id) == 0 || entry.state != "PENDING") continue;
      if (hold) {
        slurm_.hold(entry.id);
      } else {
        slurm_.release(entry.id);
      }
    }
  }

  int stop_all() {
    std::set<std::string> ours;
    for (const auto& [op, job] : jobs_) {
      if (!job.empty()) ours.insert(job);
    }
    for (const auto& entry : slurm_.queue()) {
      if (ours.count(entry.id) != 0 && active_state(entry.state)) slurm_.cancel(entry.id);
    }
    for (const auto& t : searcher_.trials()) {
      if (t.state == TrialState::running || t.state == TrialState::waiting) {
        trial_event(t.id, "stopped", "the search was stopped (dl-search stop)");
      }
    }
    append({{"kind", "search"}, {"rec", "finished"}, {"reason", "stopped"}});
    say(fmt::format("search '{}' stopped", e_.name));
    return 0;
  }

  std::string root_;
  Experiment e_;
  DriveOptions options_;
  SlurmJobs& slurm_;
  Searcher searcher_;
  Store store_;
  std::unique_ptr<JournalWriter> journal_;
  std::vector<Op> ops_;
  std::map<std::int64_t, double> intent_;
  std::map<std::int64_t, std::string> jobs_;
  std::map<std::int64_t, bool> done_;
  std::map<std::int64_t, std::string> in_job_intent_;  // op -> the job it continues in
  std::string decisions_;  // the continue/ directory; empty: no in-job continuation
  std::map<std::string, std::string> trial_control_;  // the stops carried out (this run)
};

}  // namespace

int drive(const std::string& root, const std::string& experiment, const DriveOptions& options,
          SlurmJobs& slurm) {
  Driver d(root, load_experiment(root, experiment), options, slurm);
  return d.run();
}

}  // namespace dl::exp::search
