// Prints "stamp <ns>" like stamp.cc, but only after what any PMIx-based bootstrap does:
// PMIx_Init, rank 0 puts a value, commit, one collecting fence, get, finalize. The floor
// for a launcher that, like dlrun, distributes rank 0's choices through PMIx.
#include <cstdio>
#include <ctime>
#include <exception>

#include "launcher/pmix_session.h"

int main() {
  try {
    {
      dl::pmix::Session pmix;
      if (pmix.rank() == 0) pmix.put("dl.bench", "x");
      pmix.commit();
      pmix.fence();
      pmix.get(0, "dl.bench");
    }
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    std::printf("stamp %lld\n", static_cast<long long>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pmix_stamp: %s\n", e.what());
    return 1;
  }
}
