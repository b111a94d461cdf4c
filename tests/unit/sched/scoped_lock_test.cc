// Issue 12, item 10: slurmctld's lock is released on every way out of a scope, an
// exception included (site_factor/dl's sampler holds it through SlurmctldLock).
#include "sched/scoped_lock.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace dl::sched {
namespace {

struct Levels {
  int config, job;
};

std::string events;

void fake_lock(Levels l) {
  events += "lock " + std::to_string(l.config) + std::to_string(l.job) + ";";
}
void fake_unlock(Levels l) {
  events += "unlock " + std::to_string(l.config) + std::to_string(l.job) + ";";
}

using FakeLock = ScopedLock<Levels, fake_lock, fake_unlock>;

TEST(ScopedLock, ReleasesWithTheSameLevelsWhenTheScopeEnds) {
  events.clear();
  {
    const FakeLock lock({1, 2});
    EXPECT_EQ(events, "lock 12;");
  }
  EXPECT_EQ(events, "lock 12;unlock 12;");
}

TEST(ScopedLock, ReleasesWhenAnExceptionLeavesTheScope) {
  events.clear();
  EXPECT_THROW(
      {
        const FakeLock lock({0, 3});
        throw std::runtime_error("sampling failed");
      },
      std::runtime_error);
  EXPECT_EQ(events, "lock 03;unlock 03;");
}

TEST(ScopedLock, NestedScopesReleaseInReverseOrder) {
  events.clear();
  try {
    const FakeLock outer({1, 1});
    const FakeLock inner({2, 2});
    throw 7;
  } catch (int) {
  }
  EXPECT_EQ(events, "lock 11;lock 22;unlock 22;unlock 11;");
}

}  // namespace
}  // namespace dl::sched
