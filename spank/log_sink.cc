#include <string>

#include "core/log.h"
#include "spank/guard.h"

namespace dl::spank {

void install_log_sink() {
  static const bool installed = [] {
    set_log_sink([](LogLevel level, std::string_view message) {
      const std::string line(message);
      switch (level) {
        case LogLevel::error: slurm_error("dl: %s", line.c_str()); break;
        case LogLevel::warning: slurm_info("dl: warning: %s", line.c_str()); break;
        case LogLevel::info: slurm_info("dl: %s", line.c_str()); break;
        case LogLevel::verbose: slurm_verbose("dl: %s", line.c_str()); break;
        case LogLevel::debug: slurm_debug("dl: %s", line.c_str()); break;
      }
    });
    return true;
  }();
  (void)installed;
}

}  // namespace dl::spank
