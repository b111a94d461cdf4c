#include "exp/searcher.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace dl::exp::search {

namespace {

std::string trial_id(std::size_t n) { return fmt::format("t{:03d}", n); }

nlohmann::json value_at(const Param& p, double u) {
  switch (p.kind) {
    case ParamKind::integer: {
      const auto lo = static_cast<std::int64_t>(p.low);
      const auto n = static_cast<std::int64_t>(p.high) - lo + 1;
      return lo + std::min<std::int64_t>(n - 1, static_cast<std::int64_t>(u * n));
    }
    case ParamKind::real: return p.low + u * (p.high - p.low);
    case ParamKind::log_real:
      return std::exp(std::log(p.low) + u * (std::log(p.high) - std::log(p.low)));
    case ParamKind::categorical: {
      const std::size_t n = p.choices.size();
      return p.choices[std::min(n - 1, static_cast<std::size_t>(u * static_cast<double>(n)))];
    }
  }
  return nullptr;
}

std::vector<nlohmann::json> grid_values(const Param& p) {
  std::vector<nlohmann::json> out;
  if (p.kind == ParamKind::categorical) return p.choices;
  if (p.kind == ParamKind::integer && p.high - p.low + 1 <= p.grid_points) {
    for (auto v = static_cast<std::int64_t>(p.low); v <= static_cast<std::int64_t>(p.high); ++v) {
      out.emplace_back(v);
    }
    return out;
  }
  const int n = std::max(1, p.grid_points);
  for (int i = 0; i < n; ++i) {
    const double f = n == 1 ? 0.5 : static_cast<double>(i) / (n - 1);
    if (p.kind == ParamKind::integer) {
      out.emplace_back(static_cast<std::int64_t>(std::llround(p.low + f * (p.high - p.low))));
    } else if (p.kind == ParamKind::real) {
      out.emplace_back(p.low + f * (p.high - p.low));
    } else {
      out.emplace_back(std::exp(std::log(p.low) + f * (std::log(p.high) - std::log(p.low))));
    }
  }
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

bool continuation_fits(double time_left, std::int64_t steps, double step_seconds, double warning) {
  if (std::isinf(time_left) && time_left > 0) return true;  // no time limit
  if (time_left < 0 || step_seconds < 0 || warning < 0 || steps < 0) return false;
  return static_cast<double>(steps) * step_seconds + warning <= time_left;
}

void validate(const Config& c) {
  if (c.space.empty() && c.algorithm != Algorithm::random) {
    throw InputError("hyperparameters: expected at least one");
  }
  for (const auto& p : c.space) {
    const std::string where = "hyperparameters." + p.name;
    switch (p.kind) {
      case ParamKind::integer:
        if (p.low != std::floor(p.low) || p.high != std::floor(p.high) || p.low > p.high) {
          throw InputError(where + ": expected whole numbers with minval <= maxval");
        }
        break;
      case ParamKind::real:
        if (!(p.low <= p.high) || !std::isfinite(p.low) || !std::isfinite(p.high)) {
          throw InputError(where + ": expected finite numbers with minval <= maxval");
        }
        break;
      case ParamKind::log_real:
        if (!(p.low > 0 && p.low <= p.high) || !std::isfinite(p.high)) {
          throw InputError(where + ": expected 0 < minval <= maxval (log scale)");
        }
        break;
      case ParamKind::categorical:
        if (p.choices.empty()) throw InputError(where + ": expected at least one value");
        break;
    }
    if (p.grid_points < 1) throw InputError(where + ".count: expected a whole number >= 1");
  }
  if (c.max_trials < 1) throw InputError("searcher.max_trials: expected a whole number >= 1");
  if (c.max_concurrent_trials < 1) {
    throw InputError("searcher.max_concurrent_trials: expected a whole number >= 1");
  }
  if (!(c.divisor > 1) || !std::isfinite(c.divisor)) {
    throw InputError("searcher.divisor: expected a number > 1");
  }
  if (c.max_rungs < 1 || c.max_rungs > 32) {
    throw InputError("searcher.max_rungs: expected a whole number from 1 to 32");
  }
  if (c.budget < 1) throw InputError("searcher.budget: expected a whole number of steps >= 1");
  if (c.metric.empty()) throw InputError("searcher.metric: expected a metric name");
  if (c.max_restarts < 0) throw InputError("searcher.max_restarts: expected a whole number >= 0");
}

std::vector<std::int64_t> rung_budgets(const Config& c) {
  if (c.algorithm != Algorithm::asha) return {c.budget};
  // No more rungs than the budget can be divided into: the lowest gets at least 1 step.
  const int fit = static_cast<int>(std::floor(
                      std::log(static_cast<double>(c.budget)) / std::log(c.divisor) + 1e-9)) +
                  1;
  const int n = std::max(1, std::min(c.max_rungs, fit));
  std::vector<std::int64_t> out;
  for (int k = 0; k < n; ++k) {
    const double b = static_cast<double>(c.budget) / std::pow(c.divisor, n - 1 - k);
    const auto steps = std::max<std::int64_t>(1, std::llround(b));
    if (out.empty() || steps > out.back()) out.push_back(steps);
  }
  out.back() = c.budget;
  return out;
}

std::uint64_t Rng::next() {
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

nlohmann::json sample(const std::vector<Param>& space, Rng& rng) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& p : space) out[p.name] = value_at(p, rng.uniform());
  return out;
}

std::vector<nlohmann::json> grid(const std::vector<Param>& space, std::size_t limit) {
  std::vector<nlohmann::json> out = {nlohmann::json::object()};
  for (const auto& p : space) {
    std::vector<nlohmann::json> next;
    for (const auto& partial : out) {
      for (const auto& v : grid_values(p)) {
        nlohmann::json point = partial;
        point[p.name] = v;
        next.push_back(std::move(point));
        if (next.size() >= limit) break;
      }
      if (next.size() >= limit) break;
    }
    out = std::move(next);
  }
  return out;
}

Searcher::Searcher(Config config)
    : config_(std::move(config)), rungs_(rung_budgets(config_)), rng_(config_.seed) {
  validate(config_);
  if (config_.algorithm == Algorithm::grid) {
    grid_ = grid(config_.space, static_cast<std::size_t>(config_.max_trials));
  }
}

const Trial* Searcher::find(const std::string& trial) const {
  for (const auto& t : trials_) {
    if (t.id == trial) return &t;
  }
  return nullptr;
}

Trial* Searcher::find_mut(const std::string& trial) {
  return const_cast<Trial*>(static_cast<const Searcher*>(this)->find(trial));
}

int Searcher::running() const {
  return static_cast<int>(std::count_if(trials_.begin(), trials_.end(), [](const Trial& t) {
    return t.state == TrialState::running &&
           (t.pause == Pause::none || t.pause == Pause::pausing || t.pause == Pause::unpausing);
  }));
}

Op Searcher::emit(Op op) {
  op.index = next_op_++;
  return op;
}

void Searcher::mark_in_job(const Trial& t, std::vector<Op>& out) const {
  if (!config_.continue_in_job || config_.algorithm != Algorithm::asha || out.empty()) return;
  Op& op = out.front();
  // Exactly ASHA's decision for the freed slot: only when it is this trial's next rung.
  if (op.kind == Op::Kind::resume && op.trial == t.id && t.state == TrialState::running &&
      t.pause == Pause::none && op.rung >= 1 && t.rung_values.count(op.rung - 1) != 0) {
    op.in_job = true;
  }
}

std::vector<Op> Searcher::start() {
  std::vector<Op> out;
  if (started_) return out;
  started_ = true;
  schedule(out);
  return out;
}

bool Searcher::promote(std::vector<Op>& out) {
  if (config_.algorithm != Algorithm::asha) return false;
  for (int k = static_cast<int>(rungs_.size()) - 2; k >= 0; --k) {
    // (score, creation order) of every trial with a value at rung k.
    std::vector<std::pair<double, std::size_t>> at;
    for (std::size_t i = 0; i < trials_.size(); ++i) {
      const auto it = trials_[i].rung_values.find(k);
      if (it != trials_[i].rung_values.end()) at.emplace_back(score(it->second), i);
    }
    const std::size_t top =
        static_cast<std::size_t>(std::floor(static_cast<double>(at.size()) / config_.divisor));
    if (top == 0) continue;
    std::sort(at.begin(), at.end());
    for (std::size_t j = 0; j < top; ++j) {
      Trial& t = trials_[at[j].second];
      // A paused trial keeps its place in the ranking but is not promoted while paused.
      if (t.state != TrialState::waiting || t.rung != k || t.pause != Pause::none) continue;
      t.state = TrialState::running;
      t.rung = k + 1;
      out.push_back(
          emit({Op::Kind::resume, 0, t.id, t.hparams, rungs_[k + 1], k + 1,
                fmt::format("promoted from rung {} (place {} of {})", k, j + 1, at.size())}));
      return true;
    }
  }
  return false;
}

void Searcher::continue_or_stop(Trial& t, std::vector<Op>& out) {
  const int k = t.rung;
  const double mine = score(t.rung_values.at(k));
  // Its place among the values of rung k so far (ties: the earlier trial ranks first).
  std::size_t n = 0, place = 1;
  bool before = true;  // trials_ is in creation order
  for (const auto& o : trials_) {
    if (&o == &t) before = false;
    const auto it = o.rung_values.find(k);
    if (it == o.rung_values.end() || &o == &t) continue;
    ++n;
    const double theirs = score(it->second);
    if (theirs < mine || (theirs == mine && before)) ++place;
  }
  ++n;
  const auto top = std::max<std::size_t>(
      1, static_cast<std::size_t>(std::floor(static_cast<double>(n) / config_.divisor)));
  if (place <= top) {
    t.rung = k + 1;
    out.push_back(
        emit({Op::Kind::resume, 0, t.id, t.hparams, rungs_[static_cast<std::size_t>(k + 1)], k + 1,
              fmt::format("continued from rung {} (place {} of {})", k, place, n)}));
    return;
  }
  t.state = TrialState::stopped;
  t.reason = fmt::format("stopped at rung {} (place {} of {})", k, place, n);
  out.push_back(emit({Op::Kind::stop, 0, t.id, nullptr, 0, k, t.reason}));
}

bool Searcher::create(std::vector<Op>& out) {
  if (static_cast<int>(trials_.size()) >= config_.max_trials) return false;
  nlohmann::json hparams;
  if (config_.algorithm == Algorithm::grid) {
    if (trials_.size() >= grid_.size()) return false;
    hparams = grid_[trials_.size()];
  } else {
    hparams = sample(config_.space, rng_);
  }
  Trial t;
  t.id = trial_id(trials_.size() + 1);
  t.hparams = hparams;
  trials_.push_back(t);
  out.push_back(emit({Op::Kind::create, 0, t.id, hparams, rungs_[0], 0, "new trial"}));
  return true;
}

void Searcher::release(Trial& t, const std::string& why, std::vector<Op>& out) {
  t.pause = Pause::none;
  queue_.erase(std::remove(queue_.begin(), queue_.end(), t.id), queue_.end());
  out.push_back(emit({Op::Kind::release, 0, t.id, nullptr, 0, t.rung, why}));
}

void Searcher::unpause_ended(Trial& t) {
  if (t.state == TrialState::running) return;
  // Waiting at a rung: a trial paused stays paused (not promoted); resumed, it is
  // eligible again. Ended: nothing to pause any more.
  if (t.state == TrialState::waiting && t.pause == Pause::paused) return;
  t.pause = Pause::none;
  queue_.erase(std::remove(queue_.begin(), queue_.end(), t.id), queue_.end());
}

void Searcher::pause_event(Trial& t, const Event& e, std::vector<Op>& out) {
  const bool runs = t.state == TrialState::running;
  switch (e.kind) {
    case Event::Kind::paused:
      if (t.pause == Pause::none && runs) {
        // It keeps its slot until its job is held (the held event).
        t.pause = Pause::pausing;
        out.push_back(emit(
            {Op::Kind::hold, 0, t.id, nullptr, 0, t.rung, e.reason.empty() ? "paused" : e.reason}));
      } else if (t.pause == Pause::none || t.pause == Pause::queued) {
        t.pause = Pause::paused;  // waiting at a rung, or queued with its job held
        queue_.erase(std::remove(queue_.begin(), queue_.end(), t.id), queue_.end());
      } else if (t.pause == Pause::unpausing) {
        t.pause = Pause::pausing;  // its hold is under way still
      }
      break;
    case Event::Kind::held:
      if (t.pause == Pause::pausing) {
        t.pause = Pause::paused;  // off its GPUs: the slot is free (schedule)
      } else if (t.pause == Pause::unpausing) {
        release(t, "resumed (its slot kept)", out);
      }
      break;
    case Event::Kind::resumed:
      if (t.pause == Pause::pausing) {
        t.pause = Pause::unpausing;
      } else if (t.pause == Pause::paused && !runs) {
        t.pause = Pause::none;  // waiting at its rung: may be promoted again
      } else if (t.pause == Pause::paused) {
        if (running() < config_.max_concurrent_trials) {
          release(t, "resumed (a slot was free)", out);
        } else {
          t.pause = Pause::queued;
          queue_.push_back(t.id);
        }
      }
      break;
    default: break;
  }
}

void Searcher::schedule(std::vector<Op>& out) {
  if (complete_) return;
  while (running() < config_.max_concurrent_trials) {
    // Resumed trials first, in the order they were resumed.
    if (!queue_.empty()) {
      release(*find_mut(queue_.front()), "resumed (a slot became free)", out);
      continue;
    }
    if (!promote(out) && !create(out)) break;
  }
  if (running() > 0) return;
  // A paused trial may still run (or be promoted) once resumed: the search waits for it.
  if (std::any_of(trials_.begin(), trials_.end(), [](const Trial& t) {
        return (t.state == TrialState::running || t.state == TrialState::waiting) &&
               t.pause != Pause::none;
      })) {
    return;
  }
  // Nothing runs and nothing can start: every waiting trial has lost its place.
  for (auto& t : trials_) {
    if (t.state != TrialState::waiting) continue;
    t.state = TrialState::stopped;
    t.reason = fmt::format("not promoted from rung {}", t.rung);
    out.push_back(emit({Op::Kind::stop, 0, t.id, nullptr, 0, t.rung, t.reason}));
  }
  complete_ = true;
  out.push_back(emit({Op::Kind::complete, 0, "", nullptr, 0, 0, "search complete"}));
}

std::vector<Op> Searcher::handle(const Event& e) {
  std::vector<Op> out;
  Trial* t = find_mut(e.trial);
  if (t != nullptr && e.kind == Event::Kind::stopped &&
      (t->state == TrialState::running || t->state == TrialState::waiting)) {
    // As a trial ASHA did not promote: its place goes to the next promotion or trial.
    t->state = TrialState::stopped;
    t->last_step.reset();
    t->reason = e.reason;
    unpause_ended(*t);
    out.push_back(emit({Op::Kind::stop, 0, t->id, nullptr, 0, t->rung, t->reason}));
    schedule(out);
    return out;
  }
  if (t != nullptr &&
      (e.kind == Event::Kind::paused || e.kind == Event::Kind::held ||
       e.kind == Event::Kind::resumed) &&
      (t->state == TrialState::running || t->state == TrialState::waiting)) {
    pause_event(*t, e, out);
    schedule(out);
    return out;
  }
  if (t == nullptr || t->state != TrialState::running) return out;
  if (e.kind == Event::Kind::finished || e.kind == Event::Kind::failed) {
    // Its job ended: a pause under way is done (off its GPUs), a resume under way too.
    if (t->pause == Pause::pausing) t->pause = Pause::paused;
    if (t->pause == Pause::unpausing) t->pause = Pause::none;
  }
  switch (e.kind) {
    case Event::Kind::created:
    case Event::Kind::started:
    case Event::Kind::stopped:
    case Event::Kind::paused:
    case Event::Kind::held:
    case Event::Kind::resumed: return out;
    case Event::Kind::rung_done:
      // Ranked now; `finished` records the same value when the job has ended.
      if (t->last_step) t->rung_values[t->rung] = t->last_value;
      schedule(out);
      return out;
    case Event::Kind::reported:
      if (e.step < rungs_[static_cast<std::size_t>(t->rung)] &&
          (!t->last_step || e.step >= *t->last_step) && std::isfinite(e.value)) {
        t->last_step = e.step;
        t->last_value = e.value;
      }
      return out;
    case Event::Kind::finished: {
      if (!t->last_step) {
        // Finished without the metric: the search cannot rank it, so it counts as a failure.
        return handle({Event::Kind::failed, e.trial, 0, 0,
                       fmt::format("finished without reporting '{}'", config_.metric)});
      }
      t->rung_values[t->rung] = t->last_value;
      t->last_step.reset();
      if (t->rung + 1 == static_cast<int>(rungs_.size())) {
        t->state = TrialState::completed;
        t->reason = "full budget";
      } else if (config_.asha_mode == AshaMode::stopping) {
        continue_or_stop(*t, out);
      } else {
        t->state = TrialState::waiting;
      }
      break;
    }
    case Event::Kind::failed:
      t->last_step.reset();
      if (t->restarts < config_.max_restarts) {
        ++t->restarts;
        out.push_back(emit({Op::Kind::resume, 0, t->id, t->hparams,
                            rungs_[static_cast<std::size_t>(t->rung)], t->rung,
                            fmt::format("retry {} of {} after: {}", t->restarts,
                                        config_.max_restarts, e.reason)}));
        schedule(out);  // a paused trial's slot is free now (its job ended)
        return out;
      }
      t->state = TrialState::failed;
      t->reason = e.reason;
      break;
  }
  unpause_ended(*t);
  schedule(out);
  // The first operation is the decision for the slot this rung frees (continue_or_stop's
  // with asha_mode stopping, else schedule's).
  if (e.kind == Event::Kind::finished && e.in_job) mark_in_job(*t, out);
  return out;
}

std::optional<std::string> Searcher::best() const {
  std::optional<std::string> best;
  int best_rung = -1;
  double best_score = 0;
  for (const auto& t : trials_) {
    if (t.rung_values.empty()) continue;
    const auto& [rung, value] = *t.rung_values.rbegin();
    if (rung > best_rung || (rung == best_rung && score(value) < best_score)) {
      best = t.id;
      best_rung = rung;
      best_score = score(value);
    }
  }
  return best;
}

nlohmann::json Searcher::snapshot() const {
  nlohmann::json trials = nlohmann::json::array();
  for (const auto& t : trials_) {
    nlohmann::json values = nlohmann::json::object();
    for (const auto& [k, v] : t.rung_values) values[std::to_string(k)] = v;
    trials.push_back({{"id", t.id},
                      {"hparams", t.hparams},
                      {"state", t.state},
                      {"rung", t.rung},
                      {"restarts", t.restarts},
                      {"rung_values", values},
                      {"reason", t.reason},
                      {"pause", t.pause}});
  }
  const auto b = best();
  return {{"rungs", rungs_},     {"trials", trials},      {"next_op", next_op_},
          {"rng", rng_.state()}, {"complete", complete_}, {"best", b ? *b : ""},
          {"queue", queue_}};
}

}  // namespace dl::exp::search
