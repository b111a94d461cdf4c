// No exception crosses the C boundary: every hook slurmctld calls is a one-line call
// into guarded(), which turns anything thrown into one log line "dl: <hook>: <what>"
// and the hook's error value.
#pragma once

#include <exception>

#include "sched/plugins/slurmctld_api.h"
#include "sched/scoped_lock.h"

namespace dl::sched {

// Routes dl::log() to slurmctld's log (error/info/verbose/debug). Idempotent.
void install_log_sink();

// slurmctld's locks, held for a scope (sched/scoped_lock.h).
using SlurmctldLock = ScopedLock<slurmctld_lock_t, lock_slurmctld, unlock_slurmctld>;

template <typename Result, typename Body>
Result guarded(const char* hook, Result on_error, Body&& body) noexcept {
  try {
    install_log_sink();
    return body();
  } catch (const std::exception& e) {
    error("dl: %s: %s", hook, e.what());
  } catch (...) {
    error("dl: %s: unknown error", hook);
  }
  return on_error;
}

// For hooks that return nothing.
template <typename Body>
void guarded(const char* hook, Body&& body) noexcept {
  guarded(hook, 0, [&] {
    body();
    return 0;
  });
}

}  // namespace dl::sched
