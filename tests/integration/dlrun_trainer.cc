// Integration-test helper: a stand-in training program for dlrun. Every rank runs steps
// of --step-ms, reports them with dl::report_step, and checkpoints with dl::ckpt (into
// DL_CKPT_DIR) when dl::should_checkpoint() says so; a resumed run reads its part of the
// checkpoint in DL_RESUME_FROM back and checks it. It prints one line per event:
//   start rank=R world=W restart=C resume=PATH|none first_step=S
//   request rank=R step=S        (dlrun's checkpoint request signal, SIGURG, arrived)
//   checkpoint rank=R step=S
//   done rank=R step=S
// Options: --steps N (default: until stopped), --step-ms MS (default 100), --pid-dir DIR
// (writes DIR/pid.R so a test can kill one rank), --crash-at-step S (exits 3 there on the
// first run only; with --crash-rank R on rank R only, with --crash-node NODE on the
// ranks on NODE only), --hang-rank R --hang-at-step S (on the first run only, rank R
// stops in dlrun_trainer_hang_here() at step S without reporting it, and every other rank
// reports S and then blocks in dlrun_trainer_wait_in_collective(), as peers of a hung rank
// do), --ckpt-ms MS (each checkpoint takes MS longer), --fail-runs N (the crash or hang
// happens on the first N runs, DL_RESTART_COUNT < N, instead of the first one only).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dl/ckpt.h"
#include "dl/client.h"

namespace {

std::atomic<int> requests{0};

void on_request(int) { requests.fetch_add(1); }

long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtol(v, nullptr, 10) : fallback;
}

// The model: one row of 4 floats per rank, all equal to the step that produced them, so
// that a resumed run can check it got back what was saved.
constexpr std::uint64_t kCols = 4;

void save_checkpoint(dl::ckpt::Checkpointer& ckpt, long rank, long world, long step) {
  std::vector<float> row(kCols, static_cast<float>(step));
  dl::ckpt::State state;
  state.meta.step = static_cast<std::uint64_t>(step);
  state.tensors.push_back({"model/w",
                           dl::ckpt::DType::f32,
                           {1, kCols},
                           row.data(),
                           {static_cast<std::uint64_t>(world), kCols},
                           {static_cast<std::uint64_t>(rank), 0}});
  ckpt.save(state);  // durable (on rank 0: committed) when it returns
}

// The step of the checkpoint to resume from, after reading this rank's row back (every
// read verifies its checksum).
long load_checkpoint(const std::string& path, long rank) {
  const dl::ckpt::Reader reader = dl::ckpt::Reader::open(path);
  std::vector<float> row(kCols);
  reader.read("model/w", dl::ckpt::DType::f32, row.data(),
              {{static_cast<std::uint64_t>(rank), 0}, {1, kCols}});
  const long step = static_cast<long>(reader.metadata().step);
  for (const float v : row) {
    if (v != static_cast<float>(step)) throw std::runtime_error("restored values do not match");
  }
  return step;
}

}  // namespace

// Outside the anonymous namespace and never inlined: the hang test looks for these names
// in the stacks the watchdog collects.
extern "C" __attribute__((noinline)) void dlrun_trainer_hang_here() {
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

extern "C" __attribute__((noinline)) void dlrun_trainer_wait_in_collective() {
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

int main(int argc, char** argv) {
  try {
    long steps = -1;
    long step_ms = 100;
    long crash_at = -1;
    long hang_rank = -1;
    long hang_at = -1;
    long crash_rank = -1;
    long fail_runs = 1;
    std::string crash_node;
    long ckpt_ms = 0;
    std::string pid_dir;
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string opt = argv[i];
      if (opt == "--steps") {
        steps = std::strtol(argv[i + 1], nullptr, 10);
      } else if (opt == "--step-ms") {
        step_ms = std::strtol(argv[i + 1], nullptr, 10);
      } else if (opt == "--pid-dir") {
        pid_dir = argv[i + 1];
      } else if (opt == "--crash-at-step") {
        crash_at = std::strtol(argv[i + 1], nullptr, 10);
      } else if (opt == "--crash-rank") {
        crash_rank = std::strtol(argv[i + 1], nullptr, 10);
      } else if (opt == "--crash-node") {
        crash_node = argv[i + 1];
      } else if (opt == "--fail-runs") {
        fail_runs = std::strtol(argv[i + 1], nullptr, 10);
      } else if (opt == "--hang-rank") {
        hang_rank = std::strtol(argv[i + 1], nullptr, 10);
      } else if (opt == "--hang-at-step") {
        hang_at = std::strtol(argv[i + 1], nullptr, 10);
      } else if (opt == "--ckpt-ms") {
        ckpt_ms = std::strtol(argv[i + 1], nullptr, 10);
      } else {
        std::fprintf(stderr, "dlrun_trainer: unknown option %s\n", opt.c_str());
        return 2;
      }
    }
    const long rank = env_long("RANK", 0);
    const long world = env_long("WORLD_SIZE", 1);
    const long restart = env_long("DL_RESTART_COUNT", 0);
    const char* node = std::getenv("SLURMD_NODENAME");
    const bool crash_here = (crash_rank < 0 || rank == crash_rank) &&
                            (crash_node.empty() || (node && crash_node == node));
    std::optional<dl::ckpt::Checkpointer> ckpt;
    if (std::getenv("DL_CKPT_DIR")) ckpt.emplace(dl::ckpt::Options::from_env());
    if (!pid_dir.empty()) {
      std::ofstream(pid_dir + "/pid." + std::to_string(rank)) << getpid() << "\n";
    }
    std::signal(SIGURG, on_request);
    const auto resume = dl::resume_path();
    const long first = resume ? load_checkpoint(*resume, rank) + 1 : 0;
    std::printf("start rank=%ld world=%ld restart=%ld resume=%s first_step=%ld\n", rank, world,
                restart, resume ? resume->c_str() : "none", first);
    std::fflush(stdout);
    long step = first;
    for (; steps < 0 || step < steps; ++step) {
      std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
      const bool failing_run = restart < fail_runs;
      if (step == crash_at && failing_run && crash_here) return 3;
      if (failing_run && hang_at >= 0) {
        if (rank == hang_rank && step == hang_at) dlrun_trainer_hang_here();
        if (rank != hang_rank && step == hang_at + 1) dlrun_trainer_wait_in_collective();
      }
      dl::report_step(step);
      for (int n = requests.exchange(0); n > 0; --n) {
        std::printf("request rank=%ld step=%ld\n", rank, step);
        std::fflush(stdout);
      }
      dl::report_metrics(step, {{"loss", 1.0 / static_cast<double>(step + 1)}});
      if (dl::should_checkpoint()) {
        if (ckpt) save_checkpoint(*ckpt, rank, world, step);
        std::this_thread::sleep_for(std::chrono::milliseconds(ckpt_ms));
        dl::checkpoint_done(step);
        std::printf("checkpoint rank=%ld step=%ld\n", rank, step);
        std::fflush(stdout);
      }
    }
    std::printf("done rank=%ld step=%ld\n", rank, step);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlrun_trainer: %s\n", e.what());
    return 1;
  }
}
