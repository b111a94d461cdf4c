// Integration-test helper: a stand-in training program for dlrun. Every rank runs steps
// of --step-ms, reports them with dl::report_step, and checkpoints when
// dl::should_checkpoint() says so. It prints one line per event, for the tests to check:
//   start rank=R world=W restart=C resume=PATH|none first_step=S
//   request rank=R step=S        (dlrun's checkpoint request signal, SIGURG, arrived)
//   checkpoint rank=R step=S
//   done rank=R step=S
// Options: --steps N (default: until stopped), --step-ms MS (default 100), --pid-dir DIR
// (writes DIR/pid.R so a test can kill one rank), --crash-at-step S (exits 3 there on the
// first run only).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>

#include "dl/client.h"

namespace {

std::atomic<int> requests{0};

void on_request(int) { requests.fetch_add(1); }

long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtol(v, nullptr, 10) : fallback;
}

// The checkpoint: rank 0 writes DIR/step-%09d/manifest.json and points DIR/latest at it,
// each atomically (write, fsync, rename).
void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
      fsync(fd) != 0 || close(fd) != 0 || rename(tmp.c_str(), path.c_str()) != 0) {
    throw std::runtime_error("couldn't write " + path);
  }
}

void save_checkpoint(const std::string& dir, long rank, long step) {
  if (rank != 0) return;
  char name[32];
  std::snprintf(name, sizeof name, "step-%09ld", step);
  const std::string step_dir = dir + "/" + name;
  mkdir(step_dir.c_str(), 0700);
  write_file_atomically(step_dir + "/manifest.json", "{\"step\": " + std::to_string(step) + "}\n");
  write_file_atomically(dir + "/latest", std::string(name) + "\n");
}

long step_of_checkpoint(const std::string& path) {
  std::ifstream in(path + "/manifest.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto colon = text.find(':');
  if (colon == std::string::npos) throw std::runtime_error("no step in " + path);
  return std::strtol(text.c_str() + colon + 1, nullptr, 10);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    long steps = -1;
    long step_ms = 100;
    long crash_at = -1;
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
      } else {
        std::fprintf(stderr, "dlrun_trainer: unknown option %s\n", opt.c_str());
        return 2;
      }
    }
    const long rank = env_long("RANK", 0);
    const long world = env_long("WORLD_SIZE", 1);
    const long restart = env_long("DL_RESTART_COUNT", 0);
    const char* ckpt_dir = std::getenv("DL_CKPT_DIR");
    if (!pid_dir.empty()) {
      std::ofstream(pid_dir + "/pid." + std::to_string(rank)) << getpid() << "\n";
    }
    std::signal(SIGURG, on_request);
    const auto resume = dl::resume_path();
    const long first = resume ? step_of_checkpoint(*resume) + 1 : 0;
    std::printf("start rank=%ld world=%ld restart=%ld resume=%s first_step=%ld\n", rank, world,
                restart, resume ? resume->c_str() : "none", first);
    std::fflush(stdout);
    long step = first;
    for (; steps < 0 || step < steps; ++step) {
      std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
      if (step == crash_at && restart == 0) return 3;
      dl::report_step(step);
      for (int n = requests.exchange(0); n > 0; --n) {
        std::printf("request rank=%ld step=%ld\n", rank, step);
        std::fflush(stdout);
      }
      dl::report_metrics(step, {{"loss", 1.0 / static_cast<double>(step + 1)}});
      if (dl::should_checkpoint()) {
        if (ckpt_dir) save_checkpoint(ckpt_dir, rank, step);
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
