// A lock held for a scope and released on every way out of it, an exception included,
// for a C API that locks and unlocks with the same levels by value (slurmctld's
// lock_slurmctld/unlock_slurmctld; see plugins/guard.h). A leaked slurmctld lock stops
// the whole controller.
#pragma once

namespace dl::sched {

template <typename Levels, void (*Acquire)(Levels), void (*Release)(Levels)>
class ScopedLock {
 public:
  explicit ScopedLock(Levels levels) : levels_(levels) { Acquire(levels_); }
  ~ScopedLock() { Release(levels_); }
  ScopedLock(const ScopedLock&) = delete;
  ScopedLock& operator=(const ScopedLock&) = delete;

 private:
  Levels levels_;
};

}  // namespace dl::sched
