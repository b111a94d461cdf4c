#include "exp/search_config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cmath>
#include <set>

#include "core/error.h"
#include "core/parse.h"
#include "exp/journal.h"

namespace dl::exp::search {

namespace {

// Options dl-search sets itself on every trial job.
const std::set<std::string> kReserved = {"-J",         "--job-name",       "--dl-experiment",
                                         "--dl-trial", "--dl-resume-from", "--parsable",
                                         "--wrap",     "--export"};

class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const YAML::Node& at, const std::string& why) const {
    const int line = at.Mark().line >= 0 ? at.Mark().line + 1 : 1;
    throw InputError(fmt::format("{}:{}: {}", file_, line, why));
  }

  // Rejects keys other than `allowed`, naming the first unknown one and what is allowed.
  void only(const YAML::Node& map, const std::string& where, const std::set<std::string>& allowed) {
    if (!map.IsMap()) fail(map, where + ": expected a mapping");
    for (const auto& kv : map) {
      const std::string key = kv.first.as<std::string>();
      if (allowed.count(key) == 0) {
        std::string names;
        for (const auto& a : allowed) names += (names.empty() ? "" : ", ") + a;
        fail(kv.first, fmt::format("{}{}{}: unknown key (allowed: {})", where,
                                   where.empty() ? "" : ".", key, names));
      }
    }
  }

  std::string text(const YAML::Node& n, const std::string& where) const {
    if (!n.IsScalar()) fail(n, where + ": expected a string");
    return n.as<std::string>();
  }

  double number(const YAML::Node& n, const std::string& where) const {
    if (!n.IsScalar()) fail(n, where + ": expected a number");
    const std::string s = n.as<std::string>();
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != s.size() || s.empty() || !std::isfinite(v)) {
      fail(n, fmt::format("{}: expected a number, not '{}'", where, s));
    }
    return v;
  }

  std::int64_t whole(const YAML::Node& n, const std::string& where, std::int64_t low,
                     std::int64_t high) const {
    const std::string s = n.IsScalar() ? n.as<std::string>() : std::string("?");
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (!n.IsScalar() || used != s.size() || v < low || v > high) {
      fail(n,
           fmt::format("{}: expected a whole number from {} to {}, not '{}'", where, low, high, s));
    }
    return v;
  }

  bool flag(const YAML::Node& n, const std::string& where) const {
    const std::string s = n.IsScalar() ? n.as<std::string>() : std::string("?");
    if (n.IsScalar() && n.Tag() != "!") {
      if (s == "true" || s == "True" || s == "yes") return true;
      if (s == "false" || s == "False" || s == "no") return false;
    }
    fail(n, fmt::format("{}: expected true or false, not '{}'", where, s));
  }

  nlohmann::json scalar_json(const YAML::Node& n, const std::string& where) const {
    if (!n.IsScalar()) fail(n, where + ": expected a number, a string or a boolean");
    const std::string s = n.as<std::string>();
    if (n.Tag() != "!") {  // unquoted: numbers and booleans keep their type
      auto j = nlohmann::json::parse(s, nullptr, false);
      if (!j.is_discarded() && (j.is_number() || j.is_boolean())) return j;
      if (s == "True" || s == "yes") return true;
      if (s == "False" || s == "no") return false;
    }
    return s;
  }

  Param param(const std::string& name, const YAML::Node& n) {
    const std::string where = "hyperparameters." + name;
    Param p;
    p.name = name;
    if (name.empty() || name.size() > 64 ||
        name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") !=
            std::string::npos) {
      fail(n, where + ": a name of 1 to 64 letters, digits or _ is expected");
    }
    if (n.IsScalar() || n.IsSequence()) {
      fail(n, where + ": expected a mapping with 'type' (int, float, log or categorical)");
    }
    only(n, where, {"type", "minval", "maxval", "values", "count"});
    if (!n["type"]) fail(n, where + ": 'type' is missing (int, float, log or categorical)");
    const std::string type = text(n["type"], where + ".type");
    if (type == "int" || type == "float" || type == "log") {
      p.kind = type == "int"     ? ParamKind::integer
               : type == "float" ? ParamKind::real
                                 : ParamKind::log_real;
      if (!n["minval"] || !n["maxval"]) fail(n, where + ": 'minval' and 'maxval' are required");
      if (n["values"]) fail(n["values"], where + ".values: only for type categorical");
      p.low = number(n["minval"], where + ".minval");
      p.high = number(n["maxval"], where + ".maxval");
      if (n["count"])
        p.grid_points = static_cast<int>(whole(n["count"], where + ".count", 1, 1000));
    } else if (type == "categorical") {
      p.kind = ParamKind::categorical;
      if (!n["values"] || !n["values"].IsSequence() || n["values"].size() == 0) {
        fail(n, where + ".values: expected a non-empty list");
      }
      if (n["minval"] || n["maxval"])
        fail(n, where + ": minval and maxval are not for categorical");
      for (const auto& v : n["values"]) p.choices.push_back(scalar_json(v, where + ".values"));
    } else {
      fail(n["type"],
           fmt::format("{}.type: '{}': expected int, float, log or categorical", where, type));
    }
    try {
      validate_param(p);
    } catch (const InputError& e) {
      fail(n, e.what());
    }
    return p;
  }

  static void validate_param(const Param& p) {
    Config c;
    c.space = {p};
    validate(c);
  }

 private:
  std::string file_;
};

}  // namespace

Experiment parse_experiment(const std::string& file, const std::string& text) {
  Reader r(file);
  YAML::Node doc;
  try {
    doc = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("{}:{}: {}", file, e.mark.line + 1, e.msg));
  }
  if (!doc.IsMap()) {
    throw InputError(
        fmt::format("{}:1: expected a mapping with name, trial, hyperparameters "
                    "and searcher",
                    file));
  }
  r.only(doc, "", {"name", "root", "trial", "hyperparameters", "searcher"});
  Experiment e;
  for (const char* key : {"name", "trial", "hyperparameters", "searcher"}) {
    if (!doc[key]) r.fail(doc, fmt::format("'{}' is missing", key));
  }
  e.name = r.text(doc["name"], "name");
  try {
    validate_name("name", e.name);
  } catch (const InputError& err) {
    r.fail(doc["name"], err.what());
  }
  if (doc["root"]) {
    e.root = r.text(doc["root"], "root");
    if (e.root.empty() || e.root[0] != '/') r.fail(doc["root"], "root: expected an absolute path");
  }

  const YAML::Node trial = doc["trial"];
  r.only(trial, "trial", {"command", "sbatch", "step_seconds"});
  if (!trial["command"]) r.fail(trial, "trial.command is missing (the command a trial job runs)");
  e.command = r.text(trial["command"], "trial.command");
  if (e.command.empty()) r.fail(trial["command"], "trial.command: expected a command");
  if (trial["sbatch"]) {
    const YAML::Node opts = trial["sbatch"];
    if (!opts.IsSequence()) r.fail(opts, "trial.sbatch: expected a list of sbatch options");
    for (const auto& o : opts) {
      const std::string opt = r.text(o, "trial.sbatch");
      const std::string name = opt.substr(0, opt.find('='));
      if (kReserved.count(name) != 0) {
        r.fail(o, fmt::format("trial.sbatch: {}: dl-search sets it itself", opt));
      }
      e.sbatch.push_back(opt);
    }
  }
  if (trial["step_seconds"]) {
    e.step_seconds = r.number(trial["step_seconds"], "trial.step_seconds");
    if (!(e.step_seconds > 0) || e.step_seconds > 86400) {
      r.fail(trial["step_seconds"],
             fmt::format("trial.step_seconds: expected seconds per step, > 0 and at most 86400, "
                         "not '{}'",
                         trial["step_seconds"].as<std::string>()));
    }
  }

  const YAML::Node hp = doc["hyperparameters"];
  if (!hp.IsMap() || hp.size() == 0) {
    r.fail(hp, "hyperparameters: expected a mapping of names to their ranges");
  }
  for (const auto& kv : hp)
    e.searcher.space.push_back(r.param(kv.first.as<std::string>(), kv.second));

  const YAML::Node s = doc["searcher"];
  r.only(s, "searcher",
         {"name", "metric", "mode", "max_trials", "max_concurrent_trials", "divisor", "max_rungs",
          "budget", "seed", "max_restarts", "asha_mode", "continue_in_job"});
  Config& c = e.searcher;
  if (!s["name"]) r.fail(s, "searcher.name is missing (asha, random or grid)");
  const std::string name = r.text(s["name"], "searcher.name");
  if (name == "asha") {
    c.algorithm = Algorithm::asha;
  } else if (name == "random") {
    c.algorithm = Algorithm::random;
  } else if (name == "grid") {
    c.algorithm = Algorithm::grid;
  } else {
    r.fail(s["name"], fmt::format("searcher.name: '{}': expected asha, random or grid", name));
  }
  if (s["asha_mode"]) {
    const std::string m = r.text(s["asha_mode"], "searcher.asha_mode");
    if (m != "promotion" && m != "stopping") {
      r.fail(s["asha_mode"],
             fmt::format("searcher.asha_mode: expected promotion or stopping, got '{}'", m));
    }
    if (c.algorithm != Algorithm::asha) {
      r.fail(s["asha_mode"], fmt::format("searcher.asha_mode: only for asha, not {}", name));
    }
    c.asha_mode = m == "stopping" ? AshaMode::stopping : AshaMode::promotion;
  }
  if (s["continue_in_job"]) {
    c.continue_in_job = r.flag(s["continue_in_job"], "searcher.continue_in_job");
    if (c.algorithm != Algorithm::asha) {
      r.fail(s["continue_in_job"],
             fmt::format("searcher.continue_in_job: only for asha (its rungs), not {}", name));
    }
  }
  if (!s["metric"]) r.fail(s, "searcher.metric is missing (the metric the trials report)");
  c.metric = r.text(s["metric"], "searcher.metric");
  if (s["mode"]) {
    const std::string mode = r.text(s["mode"], "searcher.mode");
    if (mode != "min" && mode != "max") {
      r.fail(s["mode"], fmt::format("searcher.mode: '{}': expected min or max", mode));
    }
    c.mode = mode == "min" ? Mode::min : Mode::max;
  }
  if (!s["budget"]) r.fail(s, "searcher.budget is missing (the steps of a full training)");
  c.budget = r.whole(s["budget"], "searcher.budget", 1, 1'000'000'000);
  if (s["max_trials"])
    c.max_trials = static_cast<int>(r.whole(s["max_trials"], "searcher.max_trials", 1, 100000));
  if (s["max_concurrent_trials"]) {
    c.max_concurrent_trials = static_cast<int>(
        r.whole(s["max_concurrent_trials"], "searcher.max_concurrent_trials", 1, 10000));
  }
  if (s["divisor"]) {
    c.divisor = r.number(s["divisor"], "searcher.divisor");
    if (!(c.divisor > 1)) {
      r.fail(s["divisor"], fmt::format("searcher.divisor: expected a number > 1, not '{}'",
                                       s["divisor"].as<std::string>()));
    }
  }
  if (s["max_rungs"])
    c.max_rungs = static_cast<int>(r.whole(s["max_rungs"], "searcher.max_rungs", 1, 32));
  if (s["seed"]) {
    c.seed = static_cast<std::uint64_t>(r.whole(s["seed"], "searcher.seed", 0, INT64_MAX));
  }
  if (s["max_restarts"]) {
    c.max_restarts = static_cast<int>(r.whole(s["max_restarts"], "searcher.max_restarts", 0, 100));
  }
  try {
    validate(c);
  } catch (const InputError& err) {
    r.fail(s, err.what());
  }
  return e;
}

nlohmann::json to_json(const Experiment& e) {
  nlohmann::json space = nlohmann::json::array();
  for (const auto& p : e.searcher.space) {
    nlohmann::json j = {{"name", p.name}, {"type", p.kind}, {"count", p.grid_points}};
    if (p.kind == ParamKind::categorical) {
      j["values"] = p.choices;
    } else {
      j["minval"] = p.low;
      j["maxval"] = p.high;
    }
    space.push_back(j);
  }
  const Config& c = e.searcher;
  return {{"name", e.name},
          {"root", e.root},
          {"command", e.command},
          {"sbatch", e.sbatch},
          {"step_seconds", e.step_seconds},
          {"hyperparameters", space},
          {"searcher",
           {{"name", c.algorithm},
            {"metric", c.metric},
            {"mode", c.mode},
            {"max_trials", c.max_trials},
            {"max_concurrent_trials", c.max_concurrent_trials},
            {"divisor", c.divisor},
            {"max_rungs", c.max_rungs},
            {"budget", c.budget},
            {"seed", c.seed},
            {"max_restarts", c.max_restarts},
            {"asha_mode", c.asha_mode},
            {"continue_in_job", c.continue_in_job}}}};
}

Experiment experiment_from_json(const nlohmann::json& j) {
  Experiment e;
  e.name = j.at("name").get<std::string>();
  e.root = j.at("root").get<std::string>();
  e.command = j.at("command").get<std::string>();
  e.sbatch = j.at("sbatch").get<std::vector<std::string>>();
  e.step_seconds = j.value("step_seconds", 0.0);  // absent in searches begun before it
  for (const auto& p : j.at("hyperparameters")) {
    Param q;
    q.name = p.at("name").get<std::string>();
    q.kind = p.at("type").get<ParamKind>();
    q.grid_points = p.at("count").get<int>();
    if (q.kind == ParamKind::categorical) {
      q.choices = p.at("values").get<std::vector<nlohmann::json>>();
    } else {
      q.low = p.at("minval").get<double>();
      q.high = p.at("maxval").get<double>();
    }
    e.searcher.space.push_back(q);
  }
  const auto& s = j.at("searcher");
  Config& c = e.searcher;
  c.algorithm = s.at("name").get<Algorithm>();
  c.metric = s.at("metric").get<std::string>();
  c.mode = s.at("mode").get<Mode>();
  c.max_trials = s.at("max_trials").get<int>();
  c.max_concurrent_trials = s.at("max_concurrent_trials").get<int>();
  c.divisor = s.at("divisor").get<double>();
  c.max_rungs = s.at("max_rungs").get<int>();
  c.budget = s.at("budget").get<std::int64_t>();
  c.seed = s.at("seed").get<std::uint64_t>();
  c.max_restarts = s.at("max_restarts").get<int>();
  // Absent in searches begun before it: promotion, the only mode then.
  c.asha_mode = s.value("asha_mode", AshaMode::promotion);
  // Absent in searches begun before it: every rung a job of its own, as they began.
  c.continue_in_job = s.value("continue_in_job", false);
  validate(c);
  return e;
}

std::optional<double> warning_seconds(const Experiment& e) {
  std::chrono::seconds grace(120);  // the SPANK plugin's default_grace
  const std::string key = "--dl-grace";
  for (std::size_t i = 0; i < e.sbatch.size(); ++i) {
    std::string value;
    if (e.sbatch[i].rfind(key + "=", 0) == 0) {
      value = e.sbatch[i].substr(key.size() + 1);
    } else if (e.sbatch[i] == key && i + 1 < e.sbatch.size()) {
      value = e.sbatch[i + 1];
    } else {
      continue;
    }
    try {
      grace = parse_duration(key, value, std::chrono::seconds(0), std::chrono::hours(24));
    } catch (const InputError&) {
      return std::nullopt;  // sbatch rejects it with the SPANK plugin's message
    }
  }
  return static_cast<double>(grace.count() + 30);
}

std::optional<std::int64_t> rung_time_min(const Experiment& e, std::int64_t steps) {
  if (!(e.step_seconds > 0) || steps <= 0) return std::nullopt;
  const auto warning = warning_seconds(e);
  if (!warning) return std::nullopt;
  const double seconds = static_cast<double>(steps) * e.step_seconds + *warning;
  return static_cast<std::int64_t>(std::ceil(seconds / 60.0));
}

}  // namespace dl::exp::search
