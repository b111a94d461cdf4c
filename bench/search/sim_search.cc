// bench/search's simulated cluster for dl-search's own searchers (exp/searcher.h, the
// code dl-search runs): W workers, one step of training = one time unit of one GPU; a
// run of a trial from step s to budget b takes b - s units (a promoted trial resumes from
// its checkpoint). Prints, as JSON, the time until a trial trained to the full budget is
// within 1% of `--best`, and the GPU time spent by then, for each seed; and where the GPU
// time went (gpu_by_rung: the steps of runs heading for each rung), how many resumes came
// the instant a rung ended or after waiting there, and when the trial that reached the
// target was created and how long it waited at rungs (the trace behind the README's
// account of what each searcher spends its time on).
//
//   sim_search --searcher asha|random --shape diverge --workers 8 --gpu-budget 32000
//              --best 0.38 --seeds 10 [--first-seed 0] [--asha-mode promotion|stopping]
//              [--divisor 3] [--max-rungs 5]
//   sim_search --shape diverge --curve lr width act mom step   (one value, for bench.py)
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <queue>
#include <string>
#include <vector>

#include "exp/searcher.h"

namespace {

using dl::exp::search::Algorithm;
using dl::exp::search::AshaMode;
using dl::exp::search::Config;
using dl::exp::search::Event;
using dl::exp::search::Op;
using dl::exp::search::ParamKind;
using dl::exp::search::Searcher;

constexpr std::int64_t kBudget = 81;

// The same functions as curves.py (see there for the shapes).
double act_of(const std::string& act, double relu, double tanh, double sigmoid) {
  return act == "relu" ? relu : act == "tanh" ? tanh : sigmoid;
}

double curve(const std::string& shape, double lr, int width, const std::string& act, double mom,
             std::int64_t step) {
  const double x = static_cast<double>(step + 1) / kBudget;
  const double l10 = std::log10(lr);
  if (shape == "diverge" || shape == "noisy") {
    const double q = 0.03 * std::pow(l10 + 2, 2) + 0.0003 * std::pow(width - 5, 2) +
                     0.01 * std::pow(mom - 0.8, 2) + act_of(act, 0.0, 0.01, 0.03);
    const double rate =
        3.0 * (1.0 + std::sqrt(lr)) * (1.3 - 0.5 * mom) * act_of(act, 1.0, 1.5, 1.0);
    double value = 0.2 + q + 1.3 * std::exp(-rate * x);
    if (lr > 0.1) value += 0.3 * x * x * std::log10(lr * 10);
    if (shape == "noisy") {
      const double phase = 12.9898 * l10 + 78.233 * static_cast<double>(step) + 37.719 * mom +
                           4.1 * width + 2.3 * act_of(act, 0, 1, 2);
      value += 0.01 * (1.0 - x) * std::sin(phase * 43.7585);
    }
    return value;
  }
  if (shape == "faithful") {
    const double q = 0.04 * std::pow(l10 + 2.5, 2) + 0.0005 * std::pow(width - 4, 2) +
                     0.02 * std::pow(mom - 0.5, 2) + act_of(act, 0.01, 0.0, 0.02);
    const double rate = 4.0 * (1.0 + 0.1 * std::sqrt(lr));
    return 0.3 + q + 1.0 * std::exp(-rate * x);
  }
  if (shape == "slowbest") {
    const double q = 0.02 * std::pow(l10 + 3, 2) + 0.0004 * std::pow(width - 6, 2) +
                     0.05 * std::pow(mom - 0.9, 2) + act_of(act, 0.0, 0.015, 0.02);
    const double rate =
        2.0 * (1.0 + 3.0 * std::sqrt(lr)) * (1.4 - 0.9 * mom) * act_of(act, 1.0, 1.4, 0.9);
    return 0.25 + q + 1.2 * std::exp(-rate * x);
  }
  // plateau
  const double q =
      0.03 * std::pow(l10 + 2, 2) + 0.0003 * std::pow(width - 3, 2) + 0.01 * std::pow(mom - 0.6, 2);
  const double fast = 2.0 * (1.0 + std::sqrt(lr)) * (1.5 - 0.5 * mom);
  if (act == "tanh") return 0.25 + 0.06 + q + 1.0 * std::exp(-3.0 * fast * x);
  if (act == "relu") {
    return 0.25 + q + 0.6 * std::exp(-2.0 * fast * x) + 0.4 * std::exp(-0.5 * fast * x);
  }
  return 0.25 + 0.02 + q + 1.0 * std::exp(-0.7 * fast * x);
}

std::string g_shape = "diverge";

double curve_of(const nlohmann::json& hp, std::int64_t step) {
  return curve(g_shape, hp["lr"].get<double>(), hp["width"].get<int>(),
               hp["act"].get<std::string>(), hp["momentum"].get<double>(), step);
}

struct Result {
  double time = -1;  // -1: not reached within the GPU budget
  double gpu = 0;
  int trials = 0;
  // Where the GPU time went (by the rung a run was heading for), and the winner's path:
  // when it was created and how long it waited at rungs for a promotion.
  std::vector<double> gpu_by_rung;
  int resumes_at_once = 0;  // resumed the instant its rung ended
  int resumes_later = 0;    // resumed after waiting at its rung
  double winner_created = -1;
  double winner_waited = 0;
};

Result simulate(Algorithm algorithm, int workers, double gpu_budget, double best,
                std::uint64_t seed, double divisor, int rungs, AshaMode asha_mode) {
  Config c;
  c.algorithm = algorithm;
  c.space = {{"lr", ParamKind::log_real, 1e-4, 1.0, {}, 3},
             {"width", ParamKind::integer, 1, 8, {}, 3},
             {"act", ParamKind::categorical, 0, 0, {"relu", "tanh", "sigmoid"}, 3},
             {"momentum", ParamKind::real, 0.0, 0.99, {}, 3}};
  c.seed = seed;
  c.max_trials = 100000;
  c.max_concurrent_trials = workers;
  c.divisor = divisor;
  c.max_rungs = rungs;
  c.budget = kBudget;
  c.asha_mode = asha_mode;
  Searcher s(c);
  const auto budgets = s.rungs();
  // (finish time, op index) of runs in flight; the steps each trial has done.
  using Run = std::pair<double, std::int64_t>;
  std::priority_queue<Run, std::vector<Run>, std::greater<>> running;
  std::map<std::int64_t, Op> ops;
  std::map<std::string, std::int64_t> done_steps;
  std::map<std::string, double> created, waited, rung_end;
  double now = 0, gpu = 0;
  Result r;
  r.gpu_by_rung.assign(budgets.size(), 0);
  auto launch = [&](const std::vector<Op>& out) {
    for (const auto& op : out) {
      if (op.kind != Op::Kind::create && op.kind != Op::Kind::resume) continue;
      const std::int64_t from = done_steps[op.trial];
      ops[op.index] = op;
      running.emplace(now + static_cast<double>(op.budget - from), op.index);
      gpu += static_cast<double>(op.budget - from);
      r.gpu_by_rung[static_cast<std::size_t>(op.rung)] += static_cast<double>(op.budget - from);
      if (op.kind == Op::Kind::create) {
        ++r.trials;
        created[op.trial] = now;
      } else {
        const double w = now - rung_end[op.trial];
        waited[op.trial] += w;
        ++(w > 0 ? r.resumes_later : r.resumes_at_once);
      }
    }
  };
  launch(s.start());
  while (!running.empty() && gpu <= gpu_budget) {
    const auto [t, index] = running.top();
    running.pop();
    now = t;
    const Op op = ops[index];
    done_steps[op.trial] = op.budget;
    rung_end[op.trial] = now;
    const double v = curve_of(op.hparams, op.budget - 1);
    if (op.budget == kBudget && v <= best * 1.01) {
      r.time = now;
      r.winner_created = created[op.trial];
      r.winner_waited = waited[op.trial];
      // GPU time actually used by `now` (runs in flight count what they have done).
      double used = gpu;
      auto rest = running;
      while (!rest.empty()) {
        used -= rest.top().first - now;
        rest.pop();
      }
      r.gpu = used;
      return r;
    }
    s.handle({Event::Kind::reported, op.trial, op.budget - 1, v, ""});
    launch(s.handle({Event::Kind::finished, op.trial, 0, 0, ""}));
  }
  r.gpu = gpu;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench/search: dl-search's searchers on a simulated cluster"};
  std::string searcher = "asha", asha_mode = "promotion";
  int workers = 8, seeds = 10, rungs = 5, first_seed = 0;
  double gpu_budget = 32000, best = 0, divisor = 3;
  std::vector<std::string> curve_args;
  app.add_option("--searcher", searcher)->check(CLI::IsMember({"asha", "random"}));
  app.add_option("--workers", workers);
  app.add_option("--seeds", seeds);
  app.add_option("--first-seed", first_seed);
  app.add_option("--gpu-budget", gpu_budget);
  app.add_option("--best", best);
  app.add_option("--divisor", divisor);
  app.add_option("--max-rungs", rungs);
  app.add_option("--asha-mode", asha_mode)->check(CLI::IsMember({"promotion", "stopping"}));
  app.add_option("--shape", g_shape)
      ->check(CLI::IsMember({"diverge", "faithful", "slowbest", "plateau", "noisy"}));
  app.add_option("--curve", curve_args)->expected(5);
  CLI11_PARSE(app, argc, argv);
  if (!curve_args.empty()) {
    std::printf("%.12f\n",
                curve(g_shape, std::stod(curve_args[0]), std::stoi(curve_args[1]), curve_args[2],
                      std::stod(curve_args[3]), std::stoll(curve_args[4])));
    return 0;
  }
  nlohmann::json out = nlohmann::json::array();
  for (int seed = first_seed; seed < first_seed + seeds; ++seed) {
    const Result r = simulate(searcher == "asha" ? Algorithm::asha : Algorithm::random, workers,
                              gpu_budget, best, static_cast<std::uint64_t>(seed), divisor, rungs,
                              asha_mode == "stopping" ? AshaMode::stopping : AshaMode::promotion);
    out.push_back({{"seed", seed},
                   {"time", r.time},
                   {"gpu", r.gpu},
                   {"trials", r.trials},
                   {"gpu_by_rung", r.gpu_by_rung},
                   {"resumes_at_once", r.resumes_at_once},
                   {"resumes_later", r.resumes_later},
                   {"winner_created", r.winner_created},
                   {"winner_waited", r.winner_waited}});
  }
  std::cout << out.dump() << "\n";
  return 0;
}
