#include <string>

#include "core/log.h"
#include "sched/plugins/guard.h"

namespace dl::sched {

void install_log_sink() {
  static const bool installed = [] {
    set_log_sink([](LogLevel level, std::string_view message) {
      const std::string line(message);
      switch (level) {
        case LogLevel::error: error("dl: %s", line.c_str()); break;
        case LogLevel::warning: info("dl: warning: %s", line.c_str()); break;
        case LogLevel::info: info("dl: %s", line.c_str()); break;
        case LogLevel::verbose: verbose("dl: %s", line.c_str()); break;
        case LogLevel::debug: debug("dl: %s", line.c_str()); break;
      }
    });
    return true;
  }();
  (void)installed;
}

}  // namespace dl::sched
