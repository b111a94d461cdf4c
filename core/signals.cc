#include "core/signals.h"

#include <fmt/format.h>

#include <csignal>

#include "core/error.h"
#include "core/parse.h"

namespace dl {
namespace {

struct Named {
  const char* name;
  int number;
};

constexpr Named kSignals[] = {
    {"HUP", SIGHUP},       {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"ILL", SIGILL},
    {"TRAP", SIGTRAP},     {"ABRT", SIGABRT}, {"BUS", SIGBUS},     {"FPE", SIGFPE},
    {"KILL", SIGKILL},     {"USR1", SIGUSR1}, {"SEGV", SIGSEGV},   {"USR2", SIGUSR2},
    {"PIPE", SIGPIPE},     {"ALRM", SIGALRM}, {"TERM", SIGTERM},   {"CHLD", SIGCHLD},
    {"CONT", SIGCONT},     {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},   {"TTIN", SIGTTIN},
    {"TTOU", SIGTTOU},     {"URG", SIGURG},   {"XCPU", SIGXCPU},   {"XFSZ", SIGXFSZ},
    {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},
    {"PWR", SIGPWR},       {"SYS", SIGSYS},
};

}  // namespace

int parse_signal(std::string_view option, std::string_view text) {
  if (text == "none") return 0;
  std::string_view name = text;
  if (name.substr(0, 3) == "SIG") name.remove_prefix(3);
  for (const auto& s : kSignals) {
    if (name == s.name) return s.number;
  }
  try {
    return static_cast<int>(parse_uint(option, text, 1, SIGRTMAX));
  } catch (const InputError&) {
    throw InputError(fmt::format(
        "{}={}: expected a signal name such as URG or SIGURG, a number, or none", option, text));
  }
}

std::string signal_name(int sig) {
  for (const auto& s : kSignals) {
    if (sig == s.number) return fmt::format("SIG{}", s.name);
  }
  return fmt::format("signal {}", sig);
}

}  // namespace dl
