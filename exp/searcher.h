// Hyperparameter search, the pure part: the search space, seeded sampling and the
// searchers (asha, random, grid) as a state machine. Events go in (a trial reported a
// metric, finished its budget, failed), operations come out (create, continue or stop a
// trial; the search is complete). Nothing here knows Slurm: exp/search_driver.h turns
// operations into jobs. Why a state machine, ASHA's two modes and pausing:
// docs/design/search.md.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace dl::exp::search {

// An enum's name in the experiment file, the journals and the status: the
// NLOHMANN_JSON_SERIALIZE_ENUM after it (a name read back that none has is the first
// pair's).
template <typename E>
std::string name_of(E e) {
  return nlohmann::json(e).template get<std::string>();
}

enum class ParamKind { integer, real, log_real, categorical };
NLOHMANN_JSON_SERIALIZE_ENUM(ParamKind, {{ParamKind::categorical, "categorical"},
                                         {ParamKind::integer, "int"},
                                         {ParamKind::real, "float"},
                                         {ParamKind::log_real, "log"}})

struct Param {
  std::string name;
  ParamKind kind = ParamKind::real;
  double low = 0;                       // integer, real, log_real: the range, both ends included
  double high = 0;                      // (log_real: low > 0)
  std::vector<nlohmann::json> choices;  // categorical
  int grid_points = 3;                  // grid: values taken from a real range
};

enum class Algorithm { asha, random, grid };
NLOHMANN_JSON_SERIALIZE_ENUM(Algorithm, {{Algorithm::grid, "grid"},
                                         {Algorithm::asha, "asha"},
                                         {Algorithm::random, "random"}})
enum class Mode { min, max };
NLOHMANN_JSON_SERIALIZE_ENUM(Mode, {{Mode::max, "max"}, {Mode::min, "min"}})
// asha: promotion waits at a rung until the trial ranks in the top 1/divisor; stopping
// decides at once, against the values of the rung so far (see above).
enum class AshaMode { promotion, stopping };
NLOHMANN_JSON_SERIALIZE_ENUM(AshaMode,
                             {{AshaMode::promotion, "promotion"}, {AshaMode::stopping, "stopping"}})

struct Config {
  Algorithm algorithm = Algorithm::asha;
  std::vector<Param> space;
  std::uint64_t seed = 0;
  int max_trials = 16;
  int max_concurrent_trials = 4;
  // bench/search's choice on its tuning curve shapes (README, "Search benchmark"): the
  // lowest rung an eighth of the budget. Lower rungs (divisor 4, 5 rungs) were faster on
  // some shapes and never reached a near-best trial on another.
  double divisor = 2;
  int max_rungs = 4;
  std::int64_t budget = 100;  // steps of the largest rung (the whole training)
  std::string metric = "loss";
  Mode mode = Mode::min;
  AshaMode asha_mode = AshaMode::promotion;
  int max_restarts = 1;  // a failed run is retried this often before the trial fails
  // asha: a trial promoted at the instant its job ends a rung continues in that job (see
  // above); false: every rung is a job of its own.
  bool continue_in_job = true;
};

// Throws dl::InputError naming the field when the configuration cannot work.
void validate(const Config& config);

// The budgets of the rungs, ascending, the last one `budget`: asha's rungs budget *
// divisor^-(R-1-k) rounded (R = max_rungs, fewer when the budget is too small to divide
// that often); one rung for random and grid.
std::vector<std::int64_t> rung_budgets(const Config& config);

// A deterministic random source (splitmix64): the same numbers on every platform, which
// std::uniform_*_distribution does not promise.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  double uniform();  // [0, 1)
  std::uint64_t state() const { return state_; }

 private:
  std::uint64_t state_;
};

// One point of the space, drawn with `rng`: {"lr": 0.01, "layers": 3, "act": "relu"}.
nlohmann::json sample(const std::vector<Param>& space, Rng& rng);
// The grid: every combination (categorical choices, every integer of a small range, else
// grid_points evenly spaced values, log-spaced for log_real), in a fixed order.
std::vector<nlohmann::json> grid(const std::vector<Param>& space, std::size_t limit);

struct Event {
  // stopped: the user stopped the trial (`dl-search stop EXP TRIAL`); it keeps its rung
  // values and checkpoints, never runs again, and the search goes on without it.
  // paused, resumed: `dl-search pause|resume EXP TRIAL`; held: the paused trial's job is
  // off its GPUs (pending, held), so its slot is free.
  // rung_done: the trial has trained its rung and its job ends without continuing
  // (continue_in_job's "end"): its value ranks the rung from now on, while its slot stays
  // taken until the job has ended (finished).
  enum class Kind {
    created,
    started,
    reported,
    finished,
    failed,
    stopped,
    paused,
    held,
    resumed,
    rung_done
  };
  Kind kind = Kind::reported;
  std::string trial;
  std::int64_t step = 0;  // reported: the step the value belongs to
  double value = 0;       // reported: the metric
  std::string reason;     // failed, stopped: why
  // finished: the trial's job still runs, waiting to learn whether it continues to the
  // next rung itself (continue_in_job).
  bool in_job = false;
};

struct Op {
  // hold: hold the trial's job (requeued held if it runs, held if pending); release: let
  // it run again (the trial's slot is its own again).
  enum class Kind { create, resume, stop, complete, hold, release };
  Kind kind = Kind::create;
  std::int64_t index = 0;  // numbered from 0 in the order they are emitted
  std::string trial;
  nlohmann::json hparams;   // create, resume
  std::int64_t budget = 0;  // create, resume: run until this many steps are done
  int rung = 0;
  std::string reason;
  // resume: the trial's job that has just ended the previous rung may run this one
  // itself (a continuation in the job); the driver falls back to a new job when the
  // job cannot (it ended already, or its time limit would not cover the rung).
  bool in_job = false;
};

NLOHMANN_JSON_SERIALIZE_ENUM(Op::Kind, {{Op::Kind::create, "create"},
                                        {Op::Kind::resume, "resume"},
                                        {Op::Kind::stop, "stop"},
                                        {Op::Kind::complete, "complete"},
                                        {Op::Kind::hold, "hold"},
                                        {Op::Kind::release, "release"}})

enum class TrialState { running, waiting, completed, stopped, failed };
NLOHMANN_JSON_SERIALIZE_ENUM(TrialState, {{TrialState::running, "running"},
                                          {TrialState::waiting, "waiting"},
                                          {TrialState::completed, "completed"},
                                          {TrialState::stopped, "stopped"},
                                          {TrialState::failed, "failed"}})
// A trial's pause, beside its state (running or waiting):
//   none      not paused
//   pausing   paused while running, its job not yet off its GPUs: it still counts
//   unpausing resumed while pausing: counts, released as soon as it is held
//   paused    paused (its job held, or waiting at a rung): does not count, not promoted
//   queued    resumed, waits for a free slot (its job held): does not count
enum class Pause { none, pausing, unpausing, paused, queued };
NLOHMANN_JSON_SERIALIZE_ENUM(Pause, {{Pause::none, "none"},
                                     {Pause::pausing, "pausing"},
                                     {Pause::unpausing, "unpausing"},
                                     {Pause::paused, "paused"},
                                     {Pause::queued, "queued"}})

// Whether a job with `time_left` seconds before its time limit can run `steps` more
// steps of `step_seconds` each and still keep `warning` seconds at the end (dlrun's
// checkpoint before the limit). Unknown figures (< 0) never fit: the job then ends as
// without continuation and the next rung is a job of its own.
bool continuation_fits(double time_left, std::int64_t steps, double step_seconds, double warning);

struct Trial {
  std::string id;
  nlohmann::json hparams;
  TrialState state = TrialState::running;
  int rung = 0;                       // the rung it runs towards, or waits at
  int restarts = 0;                   // failed runs retried
  std::map<int, double> rung_values;  // rung -> the metric at that rung's budget (as given)
  std::optional<std::int64_t> last_step;
  double last_value = 0;
  std::string reason;  // stopped, failed
  Pause pause = Pause::none;
};

class Searcher {
 public:
  explicit Searcher(Config config);

  // The operations to start with.
  std::vector<Op> start();
  // The operations an event leads to. Events about unknown trials, or that no longer
  // apply (a report from a trial that is already stopped), change nothing.
  std::vector<Op> handle(const Event& event);

  const Config& config() const { return config_; }
  const std::vector<std::int64_t>& rungs() const { return rungs_; }
  const std::vector<Trial>& trials() const { return trials_; }
  const Trial* find(const std::string& trial) const;
  bool complete() const { return complete_; }
  // The trials that hold a slot of max_concurrent_trials: running, not paused (or
  // pausing, their job not yet held). Never more than max_concurrent_trials.
  int running() const;
  // Resumed trials waiting for a slot, first resumed first.
  const std::vector<std::string>& queue() const { return queue_; }
  // The whole state, for equality checks after a replay and for `dl-search status`.
  nlohmann::json snapshot() const;
  // The trial with the best value at the highest rung any trial reached (ties: the
  // earlier trial), if any.
  std::optional<std::string> best() const;

 private:
  Trial* find_mut(const std::string& trial);
  // Fills free slots (promotions first, then new trials); completes the search when
  // nothing runs and nothing more can start.
  void schedule(std::vector<Op>& out);
  bool promote(std::vector<Op>& out);
  bool create(std::vector<Op>& out);
  // asha_mode stopping, `t` has just ended rung t.rung: continues it at once to the next
  // rung or stops it for good.
  void continue_or_stop(Trial& t, std::vector<Op>& out);
  Op emit(Op op);
  // `t` has just ended a rung and its job waits (a finished event with in_job): marks
  // out's first operation, the decision for the slot the rung frees, as a continuation
  // when it is the resume of `t` itself to its next rung.
  void mark_in_job(const Trial& t, std::vector<Op>& out) const;
  double score(double value) const { return config_.mode == Mode::min ? value : -value; }
  // The pause events (paused, held, resumed) of `t`.
  void pause_event(Trial& t, const Event& e, std::vector<Op>& out);
  // Gives `t` (paused or queued, running) its slot back: release op.
  void release(Trial& t, const std::string& why, std::vector<Op>& out);
  // A trial that ended (completed, stopped, failed) or now waits at a rung.
  void unpause_ended(Trial& t);

  Config config_;
  std::vector<std::int64_t> rungs_;
  Rng rng_;
  std::vector<nlohmann::json> grid_;
  std::vector<Trial> trials_;
  std::vector<std::string> queue_;
  std::int64_t next_op_ = 0;
  bool started_ = false;
  bool complete_ = false;
};

}  // namespace dl::exp::search
