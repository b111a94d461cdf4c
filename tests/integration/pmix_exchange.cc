// Integration-test helper: every rank publishes "<rank>@<host>" through PMIx, fences,
// reads every peer's value and prints one line
//   rank=R size=N local_rank=L local_size=M node=K peers=<all values, comma separated>
// so the test can check that all ranks saw the same complete table.
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <string>

#include "launcher/pmix_session.h"

int main() {
  try {
    dl::pmix::Session pmix;
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    const char* node = getenv("SLURMD_NODENAME");
    pmix.put("dl.test.id", std::to_string(pmix.rank()) + "@" + (node ? node : host));
    pmix.commit();
    pmix.fence();
    std::string peers;
    const std::uint32_t size = pmix.job_size();
    for (std::uint32_t r = 0; r < size; ++r) {
      if (r) peers += ',';
      peers += pmix.get(r, "dl.test.id");
    }
    std::printf("rank=%u size=%u local_rank=%u local_size=%u node=%u peers=%s\n", pmix.rank(), size,
                pmix.local_rank(), pmix.local_size(), pmix.node_id(), peers.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pmix_exchange: %s\n", e.what());
    return 1;
  }
}
