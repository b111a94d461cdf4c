// No exception crosses the C boundary: every slurm_spank_* entry point calls into
// dl::spank::guarded(), which turns anything thrown into one slurm_error line
// "dl: <hook>: <what>" and -1 (Slurm treats only negative values as failure).
#pragma once

#include <exception>

#include "spank/spank_api.h"

namespace dl::spank {

// Routes dl::log() to slurm_error/info/verbose/debug. Idempotent.
void install_log_sink();

template <typename Body>
int guarded(const char* hook, Body&& body) noexcept {
  try {
    install_log_sink();
    return body();
  } catch (const std::exception& e) {
    slurm_error("dl: %s: %s", hook, e.what());
  } catch (...) {
    slurm_error("dl: %s: unknown error", hook);
  }
  return -1;
}

}  // namespace dl::spank
