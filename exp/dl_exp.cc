// dl-exp: looks at the experiments slurm-dl tracks (exp/journal.h). Every call merges the
// journals into the experiment's database first (incremental), then reads it. See
// man/dl-exp.1. Exit codes: 0; 2 for a usage error or an unknown experiment or trial;
// 1 when dl-exp itself failed.
#include <fmt/format.h>
#include <httplib.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/cli.h"
#include "core/error.h"
#include "core/printable.h"
#include "core/sysio.h"
#include "exp/journal.h"
#include "exp/plot.h"
#include "exp/search_journal.h"
#include "exp/serve_auth.h"
#include "exp/serve_page.h"
#include "exp/store.h"
#include "exp/tensorboard.h"

namespace dl::exp {

using namespace dl::sys;  // files: join, open_file, list_dir, ...
namespace {

using nlohmann::json;

// A terminal table: columns as wide as their widest cell. Cells come from journals
// (trial, metric and event text that a job's program chose): control characters are
// printed as escapes.
void print_table(const std::vector<std::string>& head, std::vector<std::vector<std::string>> rows) {
  for (auto& row : rows) {
    for (auto& cell : row) cell = printable(cell);
  }
  std::vector<std::size_t> width(head.size());
  for (std::size_t c = 0; c < head.size(); ++c) width[c] = head[c].size();
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size() && c < width.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      out += c + 1 < cells.size() ? fmt::format("{:<{}}  ", cells[c], width[c]) : cells[c];
    }
    std::puts(out.c_str());
  };
  line(head);
  for (const auto& row : rows) line(row);
}

std::string number(double v) { return fmt::format("{:.6g}", v); }

std::string metrics_text(const json& m) {
  std::string out;
  for (const auto& [name, value] : m.items()) {
    out += (out.empty() ? "" : " ") + name + "=" + number(value.get<double>());
  }
  return out;
}

std::string time_text(double t) {
  if (t <= 0) return "-";
  const std::time_t s = static_cast<std::time_t>(t);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", std::localtime(&s));
  return buf;
}

class Tool {
 public:
  explicit Tool(std::string root) : root_(std::move(root)) {}

  // At most `bytes` of journals merged until the next call (dl-exp serve: per request).
  void set_merge_budget(std::uint64_t bytes) { budget_ = bytes; }

  // The merged store of `experiment`; an unknown one, or one that is not the caller's,
  // is an InputError naming it.
  Store& open(const std::string& experiment) {
    validate_name("experiment", experiment);
    if (const auto why = not_yours(root_, experiment)) {
      throw InputError(
          fmt::format("experiment '{}' under {} {}; dl-exp reads only your own experiments",
                      experiment, root_, *why));
    }
    if (file_type(journals_dir(root_, experiment)) != FileType::directory) {
      throw InputError(
          fmt::format("unknown experiment '{}' (none under {}; `dl-exp list` shows "
                      "the experiments)",
                      experiment, root_));
    }
    store_ = std::make_unique<Store>(root_, experiment);
    merge(*store_);
    return *store_;
  }

  // Merges within the budget; says once on stderr which journals it does not read.
  void merge(Store& s) {
    const MergeStats stats = s.merge(budget_);
    budget_ = budget_ == kNoBudget ? budget_ : budget_ - std::min(budget_, stats.bytes);
    for (const auto& why : stats.skipped) note("skipped " + why);
  }

  void note(const std::string& text) {
    if (said_.insert(text).second) {
      std::fprintf(stderr, "dl-exp: %s\n", printable(text).c_str());
    }
  }

  void check_trial(Store& s, const std::string& trial) {
    if (s.has_trial(trial)) return;
    std::string known;
    for (const auto& t : s.trials())
      known += (known.empty() ? "" : ", ") + t["id"].get<std::string>();
    throw InputError(fmt::format("unknown trial '{}' in experiment '{}' (trials: {})", trial,
                                 s.experiment(), known.empty() ? "none" : known));
  }

  json list() {
    json out = {{"root", root_}, {"experiments", json::array()}};
    std::vector<std::string> skipped;
    const std::vector<std::string> names = list_experiments(root_, &skipped);
    if (!skipped.empty()) {
      std::string which;
      for (const auto& n : skipped) which += (which.empty() ? "" : ", ") + n;
      note(fmt::format("skipped {} experiment{} under {} that {} not yours or not readable: {}",
                       skipped.size(), skipped.size() == 1 ? "" : "s", root_,
                       skipped.size() == 1 ? "is" : "are", which));
    }
    for (const auto& name : names) {
      Store s(root_, name);
      merge(s);
      const json trials = s.trials();
      json states = json::object();
      double updated = 0;
      for (const auto& t : trials) {
        states[t["state"].get<std::string>()] = states.value(t["state"].get<std::string>(), 0) + 1;
        updated = std::max(updated, t["updated"].get<double>());
      }
      out["experiments"].push_back({{"id", name},
                                    {"trials", trials.size()},
                                    {"states", states},
                                    {"updated", updated},
                                    {"database", s.path()}});
    }
    return out;
  }

  json show(const std::string& experiment) {
    Store& s = open(experiment);
    json trials = s.trials();
    const json ckpts = s.checkpoints(std::nullopt);
    for (auto& t : trials) {
      json mine = json::array();
      for (const auto& c : ckpts) {
        if (c["trial"] == t["id"]) mine.push_back(c);
      }
      t["checkpoints"] = mine;
    }
    return {{"id", experiment},
            {"database", s.path()},
            {"trials", trials},
            {"events", s.events(std::nullopt)}};
  }

  json metrics(const std::string& experiment, const std::optional<std::string>& trial) {
    Store& s = open(experiment);
    if (trial) check_trial(s, *trial);
    return {{"id", experiment}, {"metrics", s.metrics(trial)}};
  }

  json best(const std::string& experiment, const std::string& metric, const std::string& mode) {
    Store& s = open(experiment);
    std::optional<json> best;
    for (const auto& m : s.metrics(std::nullopt)) {
      if (m["name"] != metric) continue;
      const double v = m["value"].get<double>();
      if (!best || (mode == "min" ? v < (*best)["value"].get<double>()
                                  : v > (*best)["value"].get<double>())) {
        best = json{{"trial", m["trial"]}, {"step", m["step"]}, {"value", v}};
      }
    }
    if (!best) {
      throw InputError(
          fmt::format("--metric={}: no trial of experiment '{}' reported it", metric, experiment));
    }
    json out = {{"id", experiment}, {"metric", metric}, {"mode", mode}, {"best", *best}};
    for (const auto& t : s.trials()) {
      if (t["id"] == (*best)["trial"]) out["trial"] = t;
    }
    return out;
  }

  json compare(const std::string& experiment, const std::string& a, const std::string& b) {
    Store& s = open(experiment);
    check_trial(s, a);
    check_trial(s, b);
    json out = {{"id", experiment}, {"trials", json::array()}};
    for (const auto& t : s.trials()) {
      if (t["id"] == a) out["trials"].push_back(t);
    }
    for (const auto& t : s.trials()) {
      if (t["id"] == b) out["trials"].push_back(t);
    }
    return out;
  }

  json logs(const std::string& experiment, const std::string& trial) {
    Store& s = open(experiment);
    check_trial(s, trial);
    return {
        {"id", experiment}, {"trial", trial}, {"logs", s.logs(trial)}, {"events", s.events(trial)}};
  }

  // A search's rungs (dl-search) as `dl-exp plot` marks them, for the web page: the
  // metric they rank by and, per rung, its budget and the trials promoted, stopped and
  // completed there with their values. Empty for an experiment that is not a search.
  json rungs(const std::string& experiment) {
    open(experiment);
    json out = {{"id", experiment}, {"metric", nullptr}, {"rungs", json::array()}};
    if (file_type(search::spec_path(root_, experiment)) != FileType::file) return out;
    const json status = search::status(root_, experiment);
    out["metric"] = status["searcher"]["metric"];
    auto points = [](const std::vector<RungPoint>& list) {
      json a = json::array();
      for (const auto& p : list) {
        a.push_back({{"trial", p.trial}, {"value", p.value ? json(*p.value) : json(nullptr)}});
      }
      return a;
    };
    for (const auto& r : rung_marks(status)) {
      out["rungs"].push_back({{"rung", r.rung},
                              {"budget", r.budget},
                              {"promoted", points(r.promoted)},
                              {"stopped", points(r.stopped)},
                              {"completed", points(r.completed)}});
    }
    return out;
  }

  // Curves of `metric` (default: the first metric name) per trial, drawn by gnuplot.
  void plot(const std::string& experiment, std::string metric, const std::string& output) {
    plot_terminal(output);
    Store& s = open(experiment);
    const json all = s.metrics(std::nullopt);
    std::set<std::string> names;
    for (const auto& m : all) names.insert(m["name"].get<std::string>());
    if (names.empty()) {
      throw InputError(fmt::format("experiment '{}' has no metrics to plot yet", experiment));
    }
    if (metric.empty()) metric = *names.begin();
    if (!names.count(metric)) {
      std::string known;
      for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
      throw InputError(fmt::format("--metric={}: not reported in experiment '{}' (metrics: {})",
                                   metric, experiment, known));
    }
    char tmpl[] = "/tmp/dl-exp-plot.XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw SystemError("couldn't create a directory in /tmp");
    const std::string tmp = tmpl;
    try {
      std::map<std::string, std::string> data;
      for (const auto& m : all) {
        if (m["name"] != metric) continue;
        data[m["trial"].get<std::string>()] +=
            fmt::format("{} {:.17g}\n", m["step"].get<std::int64_t>(), m["value"].get<double>());
      }
      std::vector<Curve> curves;
      int i = 0;
      for (const auto& [trial, text] : data) {
        const std::string file = join(tmp, fmt::format("trial-{}.dat", i++));
        write_file_durably(file, text);
        curves.push_back({trial, file});
      }
      // A search's rungs (dl-search), when the metric is the one it ranks by.
      std::vector<RungMark> rungs;
      if (file_type(search::spec_path(root_, experiment)) == FileType::file) {
        const json status = search::status(root_, experiment);
        if (status["searcher"]["metric"] == metric) rungs = rung_marks(status);
      }
      const std::string script = join(tmp, "plot.gp");
      write_file_durably(script, plot_script(experiment, metric, curves, output, rungs));
      run_gnuplot(script);
    } catch (...) {
      remove_tree(tmp);
      throw;
    }
    remove_tree(tmp);
  }

  void export_to(const std::string& experiment, const std::string& format, const std::string& dir) {
    const json shown = show(experiment);
    Store& s = *store_;
    make_dirs(dir);
    if (format == "tensorboard") {
      // One run per trial: DIR/<trial>/events.out.tfevents.<time>.<host>, one Event per step.
      std::map<std::string,
               std::map<std::int64_t, std::pair<double, std::map<std::string, double>>>>
          steps;
      for (const auto& m : s.metrics(std::nullopt)) {
        auto& at = steps[m["trial"].get<std::string>()][m["step"].get<std::int64_t>()];
        at.first = std::max(at.first, m["time"].get<double>());
        at.second[m["name"].get<std::string>()] = m["value"].get<double>();
      }
      // A trial's name comes from its journal: it must be a plain name before it becomes
      // a directory (no "..", no "/").
      for (const auto& [trial, by_step] : steps) validate_name("trial", trial);
      for (const auto& [trial, by_step] : steps) {
        const std::string run = join(dir, trial);
        make_dirs(run);
        double first = by_step.empty() ? 0 : by_step.begin()->second.first;
        std::string bytes = tensorboard::record(tensorboard::file_version_event(first));
        for (const auto& [step, at] : by_step) {
          bytes += tensorboard::record(tensorboard::scalars_event(at.first, step, at.second));
        }
        write_file_durably(join(run, fmt::format("events.out.tfevents.{}.{}",
                                                 static_cast<long long>(first), hostname())),
                           bytes);
      }
      return;
    }
    if (format == "json") {
      json all = shown;
      all["metrics"] = s.metrics(std::nullopt);
      all["logs"] = s.logs(std::nullopt);
      write_file_durably(join(dir, experiment + ".json"), all.dump(2) + "\n");
      return;
    }
    auto csv = [](const std::string& v) {
      if (v.find_first_of(",\"\n") == std::string::npos) return v;
      std::string q = "\"";
      for (const char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
      return q + "\"";
    };
    auto cell = [&](const json& v) {
      if (v.is_string()) return csv(v.get<std::string>());
      if (v.is_null()) return std::string();
      if (v.is_number_float()) return fmt::format("{:.17g}", v.get<double>());
      return csv(v.dump());
    };
    auto table = [&](const std::string& name, const std::vector<std::string>& cols,
                     const json& rows) {
      std::string text;
      for (std::size_t c = 0; c < cols.size(); ++c) text += (c ? "," : "") + cols[c];
      text += "\n";
      for (const auto& r : rows) {
        for (std::size_t c = 0; c < cols.size(); ++c) {
          text += (c ? "," : "") + cell(r.contains(cols[c]) ? r[cols[c]] : json(nullptr));
        }
        text += "\n";
      }
      write_file_durably(join(dir, name), text);
    };
    table("trials.csv", {"id", "state", "job_id", "restarts", "started", "updated", "hparams"},
          shown["trials"]);
    table("metrics.csv", {"trial", "step", "name", "value", "time"}, s.metrics(std::nullopt));
    table("checkpoints.csv", {"trial", "step", "path", "verified", "time"},
          s.checkpoints(std::nullopt));
    table("events.csv", {"trial", "time", "kind", "reason", "step", "restarts"}, shown["events"]);
  }

 private:
  std::string root_;
  std::unique_ptr<Store> store_;
  std::uint64_t budget_ = kNoBudget;
  std::set<std::string> said_;
};

// Journal bytes one request of `dl-exp serve` may merge (under the server's one lock):
// a journal that grew by more is taken in over the next requests (the page asks again
// every two seconds).
constexpr std::uint64_t kServeMergeBudget = 64u << 20;

// `dl-exp serve`: the page and the JSON API it reads (the objects `--json` prints), bound
// to `bind` (127.0.0.1 by default: the data is the user's). Every request must name this
// host and carry the token printed at the start (exp/serve_auth.h); the page's URL sets
// a cookie with it. Requests are served one at a time: each merges the journals first,
// at most kServeMergeBudget bytes of them.
void serve(Tool& tool, const std::string& bind, int port) {
  httplib::Server server;
  std::mutex mutex;
  const std::string token = new_token();
  const std::string cookie = token_cookie_name(port);
  const std::vector<std::string> names = served_host_names(bind, hostname());
  server.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    auto refuse = [&](const std::string& why) {
      res.status = 403;
      res.set_content("dl-exp serve: " + why + "\n", "text/plain; charset=utf-8");
      return httplib::Server::HandlerResponse::Handled;
    };
    if (!host_allowed(req.get_header_value("Host"), names)) {
      return refuse("this server answers only to the names of this host (Host: " +
                    printable(req.get_header_value("Host")) + ")");
    }
    const std::string in_url = req.get_param_value("token");
    if (same_token(in_url, token)) {
      // The page's own requests (and its links without the token) carry it from now on.
      res.set_header("Set-Cookie", cookie + "=" + token + "; Path=/; HttpOnly; SameSite=Strict");
    } else if (!same_token(cookie_value(req.get_header_value("Cookie"), cookie), token) &&
               !same_token(authorization_token(req.get_header_value("Authorization")), token)) {
      return refuse("open the URL with the token that dl-exp serve printed at its start");
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  auto api = [&](const std::function<json(const httplib::Request&)>& answer) {
    return [&, answer](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mutex);
      tool.set_merge_budget(kServeMergeBudget);
      try {
        res.set_content(answer(req).dump(), "application/json");
      } catch (const InputError& e) {
        res.status = 404;
        res.set_content(json{{"error", e.what()}}.dump(), "application/json");
      } catch (const std::exception& e) {
        res.status = 500;
        res.set_content(json{{"error", e.what()}}.dump(), "application/json");
      }
    };
  };
  server.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kServePage, "text/html; charset=utf-8");
  });
  server.Get("/api/experiments", api([&](const httplib::Request&) { return tool.list(); }));
  server.Get(R"(/api/show/([^/]+))",
             api([&](const httplib::Request& req) { return tool.show(req.matches[1]); }));
  server.Get(R"(/api/metrics/([^/]+))", api([&](const httplib::Request& req) {
               return tool.metrics(req.matches[1], std::nullopt);
             }));
  server.Get(R"(/api/rungs/([^/]+))",
             api([&](const httplib::Request& req) { return tool.rungs(req.matches[1]); }));
  server.Get(R"(/api/logs/([^/]+)/([^/]+))", api([&](const httplib::Request& req) {
               return tool.logs(req.matches[1], req.matches[2]);
             }));
  if (!server.bind_to_port(bind.c_str(), port)) {
    throw SystemError(fmt::format("couldn't listen on {}:{} (in use? try --port)", bind, port));
  }
  const std::string host = bind.find(':') != std::string::npos ? "[" + bind + "]" : bind;
  std::fprintf(stderr, "dl-exp: serving http://%s:%d/?token=%s (Ctrl-C to stop)\n", host.c_str(),
               port, token.c_str());
  if (!server.listen_after_bind()) throw SystemError("the web server stopped");
}

void print_trials(const json& trials) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : trials) {
    rows.push_back({t["id"].get<std::string>(), t["state"].get<std::string>(),
                    t["job_id"].is_null() ? "-" : t["job_id"].get<std::string>(),
                    std::to_string(t["restarts"].get<std::int64_t>()),
                    t["step"].is_null() ? "-" : std::to_string(t["step"].get<std::int64_t>()),
                    metrics_text(t["metrics"]), t["hparams"].empty() ? "" : t["hparams"].dump()});
  }
  print_table({"TRIAL", "STATE", "JOB", "RESTARTS", "STEP", "METRICS", "HPARAMS"}, rows);
}

int run(int argc, char** argv) {
  CLI::App app(
      "dl-exp: the experiments slurm-dl tracks (metrics, checkpoints, events). "
      "See dl-exp(1).");
  app.require_subcommand(1);
  add_standard_flags(app, "dl-exp");
  bool as_json = false;
  app.add_flag("--json", as_json, "print JSON instead of tables");
  std::string experiment, trial, trial2, metric, mode = "min", format, out_dir;
  auto* list = app.add_subcommand("list", "the experiments and their trials' states");
  auto* show = app.add_subcommand("show", "an experiment's trials, checkpoints and events");
  show->add_option("EXP", experiment)->required();
  bool follow = false;
  double interval = 2;
  show->add_flag("-f,--follow", follow,
                 "live: show again whenever something changes, until every trial has ended");
  show->add_option("--interval", interval, "seconds between looks with --follow (default 2)")
      ->check(CLI::Range(0.1, 3600.0));
  auto* metrics = app.add_subcommand("metrics", "every metric of an experiment or trial");
  metrics->add_option("EXP", experiment)->required();
  metrics->add_option("TRIAL", trial);
  auto* best = app.add_subcommand("best", "the trial with the best value of a metric");
  best->add_option("EXP", experiment)->required();
  best->add_option("--metric", metric, "the metric")->required();
  best->add_option("--mode", mode, "min (default) or max")->check(CLI::IsMember({"min", "max"}));
  auto* compare = app.add_subcommand("compare", "two trials side by side");
  compare->add_option("EXP", experiment)->required();
  compare->add_option("T1", trial)->required();
  compare->add_option("T2", trial2)->required();
  auto* logs = app.add_subcommand("logs", "a trial's logs and events");
  logs->add_option("EXP", experiment)->required();
  logs->add_option("TRIAL", trial)->required();
  auto* exp_export =
      app.add_subcommand("export", "write an experiment as CSV, JSON or TensorBoard files");
  exp_export->add_option("EXP", experiment)->required();
  exp_export->add_option("--format", format, "csv, json or tensorboard")
      ->required()
      ->check(CLI::IsMember({"csv", "json", "tensorboard"}));
  exp_export->add_option("-o,--output", out_dir, "the directory to write to")->required();
  auto* plot = app.add_subcommand("plot", "metric curves per trial as PNG or SVG (gnuplot)");
  plot->add_option("EXP", experiment)->required();
  plot->add_option("-o,--output", out_dir, "FILE.png or FILE.svg")->required();
  plot->add_option("--metric", metric, "the metric (default: the first by name)");
  auto* serve_cmd = app.add_subcommand("serve", "a web page with the experiments, live");
  int port = 8765;
  std::string bind = "127.0.0.1";
  serve_cmd->add_option("--port", port, "the TCP port (default 8765)")->check(CLI::Range(1, 65535));
  serve_cmd->add_option("--bind", bind, "the address to listen on (default 127.0.0.1)");
  for (auto* sub : {list, show, metrics, best, compare, logs}) {
    sub->add_flag("--json", as_json, "print JSON instead of tables");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (as_json && (*exp_export || *plot || *serve_cmd)) {
    throw InputError(
        "--json: export, plot and serve write files or a page; --json is for list, show, "
        "metrics, best, compare and logs");
  }

  Tool tool(experiments_root(getenv_opt));
  auto emit = [&](const json& j) { std::cout << j.dump(2) << "\n"; };
  if (*list) {
    const json j = tool.list();
    if (as_json) return emit(j), 0;
    std::vector<std::vector<std::string>> rows;
    for (const auto& e : j["experiments"]) {
      std::string states;
      for (const auto& [s, n] : e["states"].items()) {
        states += (states.empty() ? "" : " ") + s + "=" + std::to_string(n.get<int>());
      }
      rows.push_back({e["id"].get<std::string>(), std::to_string(e["trials"].get<int>()), states,
                      time_text(e["updated"].get<double>())});
    }
    print_table({"EXPERIMENT", "TRIALS", "STATES", "UPDATED"}, rows);
  } else if (*show && follow) {
    // Live: each change printed once (JSON: one object per line), until every trial has
    // ended (completed, stopped or failed).
    std::string last;
    const bool tty = ::isatty(STDOUT_FILENO) != 0;
    for (;;) {
      const json j = tool.show(experiment);
      const std::string text = j.dump();
      if (text != last) {
        last = text;
        if (as_json) {
          std::cout << text << std::endl;
        } else {
          if (tty) std::fputs("\033[H\033[2J", stdout);
          std::printf("experiment %s (every %gs; Ctrl-C to stop)\n\n", experiment.c_str(),
                      interval);
          print_trials(j["trials"]);
          std::fflush(stdout);
        }
      }
      bool ended = !j["trials"].empty();
      for (const auto& t : j["trials"]) {
        const std::string state = t["state"].get<std::string>();
        if (state != "completed" && state != "stopped" && state != "failed") ended = false;
      }
      if (ended) return 0;
      std::this_thread::sleep_for(std::chrono::duration<double>(interval));
    }
  } else if (*show) {
    const json j = tool.show(experiment);
    if (as_json) return emit(j), 0;
    std::printf("experiment %s (%s)\n\n", experiment.c_str(),
                printable(j["database"].get<std::string>()).c_str());
    print_trials(j["trials"]);
    std::vector<std::vector<std::string>> rows;
    for (const auto& e : j["events"]) {
      rows.push_back({time_text(e["time"].get<double>()), e["trial"].get<std::string>(),
                      e["kind"].get<std::string>(),
                      e.contains("step") ? std::to_string(e["step"].get<std::int64_t>()) : "",
                      e["reason"].get<std::string>()});
    }
    std::puts("");
    print_table({"TIME", "TRIAL", "EVENT", "STEP", "REASON"}, rows);
  } else if (*metrics) {
    const json j = tool.metrics(experiment, trial.empty() ? std::nullopt : std::optional(trial));
    if (as_json) return emit(j), 0;
    std::vector<std::vector<std::string>> rows;
    for (const auto& m : j["metrics"]) {
      rows.push_back({m["trial"].get<std::string>(), std::to_string(m["step"].get<std::int64_t>()),
                      m["name"].get<std::string>(), number(m["value"].get<double>())});
    }
    print_table({"TRIAL", "STEP", "METRIC", "VALUE"}, rows);
  } else if (*best) {
    const json j = tool.best(experiment, metric, mode);
    if (as_json) return emit(j), 0;
    std::printf("%s %s=%s at step %lld\n", printable(j["best"]["trial"].get<std::string>()).c_str(),
                printable(metric).c_str(), number(j["best"]["value"].get<double>()).c_str(),
                static_cast<long long>(j["best"]["step"].get<std::int64_t>()));
  } else if (*compare) {
    const json j = tool.compare(experiment, trial, trial2);
    if (as_json) return emit(j), 0;
    print_trials(j["trials"]);
  } else if (*logs) {
    const json j = tool.logs(experiment, trial);
    if (as_json) return emit(j), 0;
    for (const auto& l : j["logs"]) {
      const std::string path = l["path"].get<std::string>();
      std::printf("==> %s <==\n", printable(path).c_str());
      std::ifstream in(path);
      if (!in) {
        std::printf("(not readable here)\n");
        continue;
      }
      std::cout << in.rdbuf();
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& e : j["events"]) {
      rows.push_back({time_text(e["time"].get<double>()), e["kind"].get<std::string>(),
                      e["reason"].get<std::string>()});
    }
    print_table({"TIME", "EVENT", "REASON"}, rows);
  } else if (*serve_cmd) {
    serve(tool, bind, port);
  } else if (*plot) {
    tool.plot(experiment, metric, out_dir);
  } else if (*exp_export) {
    tool.export_to(experiment, format, out_dir);
  }
  return 0;
}

}  // namespace
}  // namespace dl::exp

int main(int argc, char** argv) {
  try {
    return dl::exp::run(argc, argv);
  } catch (const dl::InputError& e) {
    std::fprintf(stderr, "dl-exp: %s\n", dl::printable(e.what()).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dl-exp: %s\n", dl::printable(e.what()).c_str());
    return 1;
  }
}
