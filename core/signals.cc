#include "core/signals.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdint>

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

bool status_ignores(std::string_view proc_status, int sig) {
  constexpr std::string_view kKey = "SigIgn:";
  std::size_t at = 0;
  while (at < proc_status.size()) {
    const std::size_t end = std::min(proc_status.find('\n', at), proc_status.size());
    std::string_view line = proc_status.substr(at, end - at);
    at = end + 1;
    if (line.substr(0, kKey.size()) != kKey) continue;
    line.remove_prefix(kKey.size());
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty() || line.size() > 16 || sig < 1 || sig > 64) return false;
    std::uint64_t mask = 0;
    for (const char c : line) {
      const int digit = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                        : (c >= 'a' && c <= 'f')                    ? c - 'a' + 10
                                                                    : -1;
      if (digit < 0) return false;
      mask = mask << 4 | static_cast<std::uint64_t>(digit);
    }
    return (mask >> (sig - 1)) & 1;
  }
  return false;
}

}  // namespace dl
