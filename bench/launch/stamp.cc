// Prints "stamp <ns>": the wall-clock time at which this rank's program started, i.e.
// when it had its environment. bench_launch runs it with and without dlrun.
#include <cstdio>
#include <ctime>

int main() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  std::printf("stamp %lld\n", static_cast<long long>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec);
  return 0;
}
