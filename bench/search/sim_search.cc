// bench/search's simulated cluster for dl-search's own searchers (exp/searcher.h, the
// code dl-search runs): W workers, one step of training = one time unit of one GPU; a
// run of a trial from step s to budget b takes b - s units (a promoted trial resumes from
// its checkpoint). Prints, as JSON, the time until a trial trained to the full budget is
// within 1% of `--best`, and the GPU time spent by then, for each seed.
//
//   sim_search --searcher asha|random --workers 8 --gpu-budget 32000 --best 0.38 --seeds 10
//   sim_search --curve lr width act mom step      (one value of the curve, for bench.py)
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
using dl::exp::search::Config;
using dl::exp::search::Event;
using dl::exp::search::Op;
using dl::exp::search::ParamKind;
using dl::exp::search::Searcher;

constexpr std::int64_t kBudget = 81;

// The same function as curves.py.
double curve(double lr, int width, const std::string& act, double mom, std::int64_t step) {
  const double x = static_cast<double>(step + 1) / kBudget;
  const double act_cost = act == "relu" ? 0.0 : act == "tanh" ? 0.01 : 0.03;
  const double q = 0.03 * std::pow(std::log10(lr) + 2, 2) + 0.0003 * std::pow(width - 5, 2) +
                   0.01 * std::pow(mom - 0.8, 2) + act_cost;
  const double floor = 0.2 + q;
  double rate = 3.0 * (1.0 + std::sqrt(lr)) * (1.3 - 0.5 * mom);
  if (act == "tanh") rate *= 1.5;
  double value = floor + 1.3 * std::exp(-rate * x);
  if (lr > 0.1) value += 0.3 * x * x * std::log10(lr * 10);
  return value;
}

double curve_of(const nlohmann::json& hp, std::int64_t step) {
  return curve(hp["lr"].get<double>(), hp["width"].get<int>(), hp["act"].get<std::string>(),
               hp["momentum"].get<double>(), step);
}

struct Result {
  double time = -1;  // -1: not reached within the GPU budget
  double gpu = 0;
  int trials = 0;
};

Result simulate(Algorithm algorithm, int workers, double gpu_budget, double best,
                std::uint64_t seed, double divisor, int rungs) {
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
  Searcher s(c);
  const auto budgets = s.rungs();
  // (finish time, op index) of runs in flight; the steps each trial has done.
  using Run = std::pair<double, std::int64_t>;
  std::priority_queue<Run, std::vector<Run>, std::greater<>> running;
  std::map<std::int64_t, Op> ops;
  std::map<std::string, std::int64_t> done_steps;
  double now = 0, gpu = 0;
  Result r;
  auto launch = [&](const std::vector<Op>& out) {
    for (const auto& op : out) {
      if (op.kind != Op::Kind::create && op.kind != Op::Kind::resume) continue;
      const std::int64_t from = done_steps[op.trial];
      ops[op.index] = op;
      running.emplace(now + static_cast<double>(op.budget - from), op.index);
      gpu += static_cast<double>(op.budget - from);
      if (op.kind == Op::Kind::create) ++r.trials;
    }
  };
  launch(s.start());
  while (!running.empty() && gpu <= gpu_budget) {
    const auto [t, index] = running.top();
    running.pop();
    now = t;
    const Op op = ops[index];
    done_steps[op.trial] = op.budget;
    const double v = curve_of(op.hparams, op.budget - 1);
    if (op.budget == kBudget && v <= best * 1.01) {
      r.time = now;
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
  std::string searcher = "asha";
  int workers = 8, seeds = 10, rungs = 5;
  double gpu_budget = 32000, best = 0, divisor = 3;
  std::vector<std::string> curve_args;
  app.add_option("--searcher", searcher)->check(CLI::IsMember({"asha", "random"}));
  app.add_option("--workers", workers);
  app.add_option("--seeds", seeds);
  app.add_option("--gpu-budget", gpu_budget);
  app.add_option("--best", best);
  app.add_option("--divisor", divisor);
  app.add_option("--max-rungs", rungs);
  app.add_option("--curve", curve_args)->expected(5);
  CLI11_PARSE(app, argc, argv);
  if (!curve_args.empty()) {
    std::printf("%.12f\n", curve(std::stod(curve_args[0]), std::stoi(curve_args[1]), curve_args[2],
                                 std::stod(curve_args[3]), std::stoll(curve_args[4])));
    return 0;
  }
  nlohmann::json out = nlohmann::json::array();
  for (int seed = 0; seed < seeds; ++seed) {
    const Result r = simulate(searcher == "asha" ? Algorithm::asha : Algorithm::random, workers,
                              gpu_budget, best, static_cast<std::uint64_t>(seed), divisor, rungs);
    out.push_back({{"seed", seed}, {"time", r.time}, {"gpu", r.gpu}, {"trials", r.trials}});
  }
  std::cout << out.dump() << "\n";
  return 0;
}
