#include "exp/plot.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace dl::exp {
namespace {

// gnuplot strings in single quotes: a quote is doubled.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
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

std::string plot_script(const std::string& experiment, const std::string& metric,
                        const std::vector<Curve>& curves, const std::string& output) {
  const std::string terminal = plot_terminal(output);
  std::string s = terminal == "png" ? "set terminal png size 900,600\n"
                                    : "set terminal svg size 900,600 dynamic\n";
  s += "set output " + quoted(output) + "\n";
  s += "set title " + quoted(fmt::format("{}: {} per trial", experiment, metric)) + " noenhanced\n";
  s += "set xlabel 'step'\nset ylabel " + quoted(metric) + " noenhanced\n";
  s += "set key outside right noenhanced\nset grid\n";
  s += "plot ";
  for (std::size_t i = 0; i < curves.size(); ++i) {
    s += (i ? ", \\\n     " : "") + quoted(curves[i].data_file) +
         " using 1:2 with linespoints title " + quoted(curves[i].trial);
  }
  return s + "\n";
}

void run_gnuplot(const std::string& script_file) {
  const pid_t pid = ::fork();
  if (pid < 0) throw SystemError(std::string("couldn't fork for gnuplot: ") + std::strerror(errno));
  if (pid == 0) {
    char* const argv[] = {const_cast<char*>("gnuplot"), const_cast<char*>(script_file.c_str()),
                          nullptr};
    ::execvp("gnuplot", argv);
    std::fprintf(stderr, "dl-exp: couldn't run gnuplot: %s (install gnuplot-nox)\n",
                 std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw SystemError("couldn't wait for gnuplot");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw SystemError(fmt::format(
        "gnuplot failed ({}) on {}",
        WIFEXITED(status) ? fmt::format("exit {}", WEXITSTATUS(status)) : "killed", script_file));
  }
}

}  // namespace dl::exp
