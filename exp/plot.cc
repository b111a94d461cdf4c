#include "exp/plot.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/process.h"

namespace dl::exp {
namespace {

// gnuplot strings in single quotes: a quote is doubled.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// gnuplot strings in double quotes (for line breaks): backslash and quote escaped.
std::string dquoted(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out + "\"";
}

// "t001 t002 t003 +5 more": at most `n` names.
std::string names(const std::vector<RungPoint>& points, std::size_t n = 6) {
  std::string out;
  for (std::size_t i = 0; i < points.size() && i < n; ++i) out += (i ? " " : "") + points[i].trial;
  if (points.size() > n) out += fmt::format(" +{} more", points.size() - n);
  return out;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::string plot_terminal(const std::string& output) {
  if (ends_with(output, ".png")) return "png";
  if (ends_with(output, ".svg")) return "svg";
  throw InputError("-o " + output + ": expected a file name ending in .png or .svg");
}

std::vector<RungMark> rung_marks(const nlohmann::json& status) {
  std::vector<RungMark> out;
  const auto& budgets = status.at("rungs");
  for (std::size_t k = 0; k < budgets.size(); ++k) {
    RungMark m;
    m.rung = static_cast<int>(k);
    m.budget = budgets[k].get<std::int64_t>();
    const std::string key = std::to_string(k);
    for (const auto& t : status.at("trials")) {
      const std::string id = t.at("id").get<std::string>();
      const std::string state = t.at("state").get<std::string>();
      const int rung = t.at("rung").get<int>();
      std::optional<double> value;
      if (t.at("rung_values").contains(key)) value = t["rung_values"][key].get<double>();
      if (rung > m.rung && value) {
        m.promoted.push_back({id, value});
      } else if (rung == m.rung && state == "stopped") {
        m.stopped.push_back({id, value});
      } else if (rung == m.rung && state == "completed") {
        m.completed.push_back({id, value});
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::string plot_script(const std::string& experiment, const std::string& metric,
                        const std::vector<Curve>& curves, const std::string& output,
                        const std::vector<RungMark>& rungs) {
  const std::string terminal = plot_terminal(output);
  std::string s = terminal == "png" ? "set terminal png size 900,600\n"
                                    : "set terminal svg size 900,600 dynamic\n";
  s += "set output " + quoted(output) + "\n";
  s += "set title " + quoted(fmt::format("{}: {} per trial", experiment, metric)) + " noenhanced\n";
  s += "set xlabel 'step'\nset ylabel " + quoted(metric) + " noenhanced\n";
  s += "set key outside right noenhanced\nset grid\n";
  // The rungs: a dashed line at the step whose metric ranks the trials, a label with the
  // budget and who was promoted or stopped there (labels staggered downwards so that
  // close rungs stay readable), and the trials' values there as points (inline data).
  std::string promoted, stopped;
  for (const auto& r : rungs) {
    const std::int64_t x = r.budget - 1;
    s += fmt::format(
        "set arrow from {}, graph 0 to {}, graph 1 nohead dashtype 2 lc rgb 'gray40'\n", x, x);
    std::string text = fmt::format("rung {}: {} steps", r.rung, r.budget);
    if (!r.promoted.empty()) text += "\npromoted " + names(r.promoted);
    if (!r.stopped.empty()) text += "\nstopped " + names(r.stopped);
    if (!r.completed.empty()) text += "\ncompleted " + names(r.completed);
    // The last rung's line is the curves' right end: its label goes to the left of it.
    const bool last = &r == &rungs.back() && rungs.size() > 1;
    s +=
        fmt::format("set label {} at {}, graph {:.2f} {} font ',8' noenhanced\n", dquoted(text), x,
                    0.97 - 0.16 * (r.rung % 4), last ? "right offset -0.5,0" : "left offset 0.5,0");
    for (const auto& p : r.promoted) {
      if (p.value) promoted += fmt::format("{} {:.17g}\n", x, *p.value);
    }
    for (const auto& p : r.stopped) {
      if (p.value) stopped += fmt::format("{} {:.17g}\n", x, *p.value);
    }
  }
  if (!promoted.empty()) s += "$promoted << EOD\n" + promoted + "EOD\n";
  if (!stopped.empty()) s += "$stopped << EOD\n" + stopped + "EOD\n";
  s += "plot ";
  for (std::size_t i = 0; i < curves.size(); ++i) {
    s += (i ? ", \\\n     " : "") + quoted(curves[i].data_file) +
         " using 1:2 with linespoints title " + quoted(curves[i].trial);
  }
  if (!promoted.empty()) {
    s += ", \\\n     $promoted using 1:2 with points pt 9 ps 1.8 lc rgb 'dark-green' title "
         "'promoted'";
  }
  if (!stopped.empty()) {
    s += ", \\\n     $stopped using 1:2 with points pt 2 ps 1.8 lc rgb 'red' title 'stopped'";
  }
  return s + "\n";
}

void run_gnuplot(const std::string& script_file) {
  CommandSpec spec;
  spec.argv = {"gnuplot", script_file};
  spec.capture = false;
  CommandResult r;
  try {
    r = run_command(spec);
  } catch (const SystemError& e) {
    throw SystemError(fmt::format("{} (install gnuplot-nox)", e.what()));
  }
  if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) {
    throw SystemError(
        fmt::format("gnuplot failed ({}) on {}", describe_wait_status(r.status), script_file));
  }
}

}  // namespace dl::exp
