// Launch benchmark: the time until every rank of an 8-rank, 4-node step has started its
// program with its environment, with dlrun against bare `srun --mpi=pmix`, alternating
// in the same run, repeated; prints the medians, their ratio and the absolute overhead.
// A third variant, a program that only does one PMIx put/fence/get, shows what any
// PMIx-based bootstrap costs on the same cluster.
//
//   bench_launch [--runs N] [--nodes N] [--tasks-per-node N]
//
// Needs a running cluster (SLURM_CONF), e.g. scripts/minicluster up. Outside an
// allocation it runs itself under salloc, so that every step starts at once instead of
// waiting for the scheduler. The target is an overhead of at most 10% or at most 50 ms.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace {

long long now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<long long>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

struct Sample {
  double ready_ms;  // srun started -> the last rank's program started
  double total_ms;  // srun started -> srun exited
};

// Runs argv, returns its stdout; throws if it fails.
std::string run(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  // srun's and dlrun's messages ("job queued", status lines) would drown the result.
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) throw std::runtime_error(std::string("couldn't run srun: ") + std::strerror(rc));
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("srun failed: " + out);
  }
  return out;
}

Sample measure(const std::vector<std::string>& argv, int ranks) {
  const long long start = now_ns();
  const std::string out = run(argv);
  const long long end = now_ns();
  long long last = 0;
  int seen = 0;
  for (std::size_t pos = 0; (pos = out.find("stamp ", pos)) != std::string::npos; pos += 6) {
    last = std::max(last, std::atoll(out.c_str() + pos + 6));
    ++seen;
  }
  if (seen != ranks) {
    throw std::runtime_error("expected " + std::to_string(ranks) + " stamps, got: " + out);
  }
  return {(last - start) / 1e6, (end - start) / 1e6};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string sibling(const char* argv0, const std::string& relative) {
  std::string dir = argv0;
  const auto slash = dir.rfind('/');
  dir = slash == std::string::npos ? "." : dir.substr(0, slash);
  return dir + "/" + relative;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 15;
  int nodes = 4;
  int per_node = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string opt = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (opt == "--runs") {
      runs = value;
    } else if (opt == "--nodes") {
      nodes = value;
    } else if (opt == "--tasks-per-node") {
      per_node = value;
    } else {
      std::fprintf(stderr, "bench_launch: unknown option %s\n", opt.c_str());
      return 2;
    }
  }
  if (!std::getenv("SLURM_CONF")) {
    std::fprintf(stderr,
                 "bench_launch: SLURM_CONF is not set (start a cluster: scripts/minicluster up)\n");
    return 2;
  }
  if (!std::getenv("SLURM_JOB_ID")) {
    std::vector<std::string> args = {
        "salloc", "-Q", "-N", std::to_string(nodes), "--ntasks-per-node", std::to_string(per_node)};
    for (int i = 0; i < argc; ++i) args.push_back(argv[i]);
    std::vector<char*> cargs;
    for (auto& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    execvp("salloc", cargs.data());
    std::fprintf(stderr, "bench_launch: couldn't run salloc: %s\n", std::strerror(errno));
    return 1;
  }
  try {
    const std::string stamp = sibling(argv[0], "stamp");
    const std::string dlrun = sibling(argv[0], "../../launcher/dlrun");
    const std::vector<std::string> srun = {"srun",
                                           "--mpi=pmix",
                                           "-N",
                                           std::to_string(nodes),
                                           "--ntasks-per-node",
                                           std::to_string(per_node)};
    std::vector<std::string> bare = srun;
    bare.push_back(stamp);
    std::vector<std::string> pmix_floor = srun;
    pmix_floor.push_back(sibling(argv[0], "pmix_stamp"));
    std::vector<std::string> with_dlrun = srun;
    with_dlrun.insert(with_dlrun.end(), {dlrun, "--no-prefix", stamp});
    const int ranks = nodes * per_node;
    // Warm up: the first steps load plugins and fill caches on every node.
    measure(bare, ranks);
    measure(pmix_floor, ranks);
    measure(with_dlrun, ranks);
    std::vector<double> bare_ready, bare_total, floor_ready, dl_ready, dl_total;
    for (int i = 0; i < runs; ++i) {
      // Interleaved, so that drift on the machine affects all alike.
      const Sample b = measure(bare, ranks);
      const Sample f = measure(pmix_floor, ranks);
      const Sample d = measure(with_dlrun, ranks);
      bare_ready.push_back(b.ready_ms);
      bare_total.push_back(b.total_ms);
      floor_ready.push_back(f.ready_ms);
      dl_ready.push_back(d.ready_ms);
      dl_total.push_back(d.total_ms);
    }
    const double br = median(bare_ready);
    const double dr = median(dl_ready);
    const double overhead = dr - br;
    const double ratio = dr / br;
    std::vector<double> diffs;
    for (int i = 0; i < runs; ++i) diffs.push_back(dl_ready[i] - bare_ready[i]);
    std::sort(diffs.begin(), diffs.end());
    std::printf("launch of %d ranks on %d nodes, %d runs each, medians:\n", ranks, nodes, runs);
    std::printf(
        "  srun --mpi=pmix stamp        every rank started after %6.1f ms (srun total %6.1f ms)\n",
        br, median(bare_total));
    std::printf(
        "  srun --mpi=pmix dlrun stamp  every rank started after %6.1f ms (srun total %6.1f ms)\n",
        dr, median(dl_total));
    const double fr = median(floor_ready);
    std::printf(
        "  srun --mpi=pmix pmix_stamp   one PMIx fence done after    %6.1f ms (any PMIx "
        "bootstrap)\n",
        fr);
    std::printf(
        "  overhead per pair of runs: min %+.1f, quartiles %+.1f %+.1f %+.1f, max %+.1f ms\n",
        diffs.front(), diffs[diffs.size() / 4], median(diffs), diffs[diffs.size() * 3 / 4],
        diffs.back());
    std::printf("  ratio %.3f, overhead %+.1f ms: %s the target (<= 10%% or <= 50 ms)\n", ratio,
                overhead, (ratio <= 1.10 || overhead <= 50.0) ? "within" : "NOT within");
    std::printf("  beyond one PMIx fence: ratio %.3f, %+.1f ms\n", dr / fr, dr - fr);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_launch: %s\n", e.what());
    return 1;
  }
}
