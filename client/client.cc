#include "dl/client.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/channel.h"
#include "client/decision_file.h"
#include "client/journal.h"

namespace dl {
namespace {

// A program that loads this library uses the client API: on a preemption dlrun waits
// for its checkpoint (see dlrun(1)). Marked when the library is loaded, before the
// program's first verb; errors are left to that verb, which reports them.
__attribute__((constructor)) void mark_attached() {
  const char* path = std::getenv("DL_CLIENT_FILE");
  if (path == nullptr || *path == '\0') return;
  const int fd = ::open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      st.st_size >= static_cast<off_t>(channel::kSize)) {
    void* p = ::mmap(nullptr, channel::kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) {
      auto* page = static_cast<channel::Page*>(p);
      if (page->magic == channel::kMagic && page->version == channel::kVersion) {
        page->attached.store(1, std::memory_order_release);
      }
      ::munmap(p, channel::kSize);
    }
  }
  ::close(fd);
}

using channel::Page;

// How long report_step waits for an agreed step. dlrun answers within a second; this
// only matters when dlrun itself is gone, and then the program should carry on rather
// than hang (it is killed with dlrun anyway).
constexpr std::chrono::seconds kWaitLimit{60};
constexpr std::chrono::milliseconds kPollInterval{1};

std::runtime_error system_error(const std::string& what, const char* path) {
  return std::runtime_error("dl: couldn't " + what + " DL_CLIENT_FILE=" + path + ": " +
                            std::strerror(errno));
}

std::runtime_error journal_error(const std::string& what, const std::string& path) {
  return std::runtime_error("dl: couldn't " + what + " the metrics journal " + path + ": " +
                            std::strerror(errno));
}

// The mapping of DL_CLIENT_FILE, made on first use. Never unmapped: child processes and
// other threads may still use it while the process exits.
class Channel {
 public:
  static Channel& get() {
    static Channel instance;
    return instance;
  }

  Page* page() const { return page_; }

  // Serializes metrics writers of this process and, through the file lock, of other
  // processes of the same rank (the seqlock lets dlrun read without locking).
  void write_metrics(std::int64_t step, const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pid_ != ::getpid()) {
      // A forked child shares the parent's open file, and with it the flock: its own
      // descriptor makes the lock exclude the parent too.
      fd_ = ::open(path_, O_RDWR | O_CLOEXEC);
      if (fd_ < 0) throw system_error("open", path_);
      pid_ = ::getpid();
    }
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno != EINTR) throw system_error("lock", path_);
    }
    const std::int64_t seq = page_->metrics_seq.load(std::memory_order_relaxed);
    page_->metrics_seq.store(seq + 1, std::memory_order_release);
    std::atomic_thread_fence(std::memory_order_release);
    const std::size_t n = std::min(text.size(), channel::kMetricsBytes - 1);
    std::memcpy(page_->metrics, text.data(), n);
    page_->metrics[n] = '\0';
    page_->metrics_step.store(step, std::memory_order_relaxed);
    page_->metrics_seq.store(seq + 2, std::memory_order_release);
    ::flock(fd_, LOCK_UN);
  }

 private:
  Channel() {
    path_ = std::getenv("DL_CLIENT_FILE");
    if (path_ == nullptr || *path_ == '\0') return;
    fd_ = ::open(path_, O_RDWR | O_CLOEXEC);
    if (fd_ < 0) throw system_error("open", path_);
    void* p = ::mmap(nullptr, channel::kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) throw system_error("map", path_);
    auto* page = static_cast<Page*>(p);
    if (page->magic != channel::kMagic || page->version != channel::kVersion) {
      throw std::runtime_error(std::string("dl: DL_CLIENT_FILE=") + path_ +
                               " is not a dlrun channel of version " +
                               std::to_string(channel::kVersion));
    }
    page_ = page;
    pid_ = ::getpid();
  }

  const char* path_ = nullptr;
  int fd_ = -1;
  pid_t pid_ = -1;
  Page* page_ = nullptr;
  std::mutex mutex_;
};

// The metrics journal of this process (exp/, ARCHITECTURE.md), when dlrun gave rank 0's
// program DL_EXP_JOURNALS: every report_metrics call becomes one record, appended once,
// so the tracking store gets every metric, not the samples dlrun reads from the page.
// A file per process (a forked child makes its own): no two writers share a file.
class MetricsJournal {
 public:
  static MetricsJournal& get() {
    static MetricsJournal* instance = new MetricsJournal;  // used until exit
    return *instance;
  }

  void append(std::int64_t step, const std::map<std::string, double>& metrics) {
    if (dir_.empty()) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (pid_ != ::getpid()) open_new();
    std::string json = "{\"kind\":\"metrics\",\"seq\":" + std::to_string(++seq_) + ",\"trial\":\"" +
                       trial_ + "\",\"step\":" + std::to_string(step) +
                       ",\"time\":" + number(now_seconds()) + ",\"values\":{";
    bool first = true;
    for (const auto& [name, value] : metrics) {
      json += (first ? "\"" : ",\"") + name + "\":" + number(value);
      first = false;
    }
    json += "}}";
    const std::string line = journal::frame(json);
    std::size_t done = 0;
    while (done < line.size()) {
      const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw journal_error("append to", path_);
      done += static_cast<std::size_t>(n);
    }
    // Durable at most a second later; the page cache keeps it through a kill -9.
    const double now = now_seconds();
    if (now - last_sync_ > 1.0) {
      ::fdatasync(fd_);
      last_sync_ = now;
    }
  }

 private:
  MetricsJournal() {
    const char* dir = std::getenv("DL_EXP_JOURNALS");
    const char* trial = std::getenv("DL_EXP_TRIAL");
    if (dir == nullptr || *dir == '\0' || trial == nullptr || *trial == '\0') return;
    dir_ = dir;
    trial_ = trial;
  }

  static double now_seconds() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  static std::string number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
  }

  void open_new() {
    if (fd_ >= 0 && pid_ != -1) ::close(fd_);  // the parent's file, inherited by fork
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
    path_ = dir_ + "/metrics-" + trial_ + "." + host + "." + std::to_string(::getpid()) + "." +
            std::to_string(ns) + ".jsonl";
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC,
                 0600);
    if (fd_ < 0) throw journal_error("create", path_);
    pid_ = ::getpid();
    seq_ = 0;
    last_sync_ = 0;
  }

  std::string dir_, trial_, path_;
  int fd_ = -1;
  pid_t pid_ = -1;
  std::uint64_t seq_ = 0;
  double last_sync_ = 0;
  std::mutex mutex_;
};

void check_step(const char* verb, std::int64_t step) {
  if (step < 0) {
    throw std::invalid_argument(std::string("dl::") + verb + "(" + std::to_string(step) +
                                "): the step must be >= 0");
  }
}

bool valid_metric_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (const unsigned char c : name) {
    if (!std::isalnum(c) && std::strchr("_.-/:", c) == nullptr) return false;
  }
  return true;
}

}  // namespace

bool should_checkpoint() {
  const Page* p = Channel::get().page();
  if (p == nullptr) return false;
  return channel::checkpoint_due(
      p->step.load(std::memory_order_acquire), p->target_seq.load(std::memory_order_acquire),
      p->target_step.load(std::memory_order_acquire), p->done_seq.load(std::memory_order_acquire));
}

void report_step(std::int64_t step) {
  check_step("report_step", step);
  Page* p = Channel::get().page();
  if (p == nullptr) return;
  p->step.store(step, std::memory_order_release);
  const std::int64_t request = p->request_seq.load(std::memory_order_acquire);
  if (!channel::must_wait_for_target(request, p->target_seq.load(std::memory_order_acquire))) {
    return;
  }
  p->frozen_seq.store(request, std::memory_order_release);
  const auto limit = std::chrono::steady_clock::now() + kWaitLimit;
  while (channel::must_wait_for_target(p->request_seq.load(std::memory_order_acquire),
                                       p->target_seq.load(std::memory_order_acquire))) {
    if (std::chrono::steady_clock::now() > limit) {
      std::fprintf(stderr, "dl: no checkpoint step from dlrun after %llds; continuing\n",
                   static_cast<long long>(kWaitLimit.count()));
      return;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

void report_metrics(std::int64_t step, const std::map<std::string, double>& metrics) {
  check_step("report_metrics", step);
  std::string text;
  for (const auto& [name, value] : metrics) {
    if (!valid_metric_name(name)) {
      throw std::invalid_argument("dl::report_metrics: metric name '" + name +
                                  "': expected 1 to 64 letters, digits or _.-/:");
    }
    if (!std::isfinite(value)) {
      throw std::invalid_argument("dl::report_metrics: metric '" + name + "' is not finite");
    }
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s%s=%.6g", text.empty() ? "" : " ", name.c_str(), value);
    text += buf;
  }
  MetricsJournal::get().append(step, metrics);
  Channel& c = Channel::get();
  if (c.page() == nullptr) return;
  c.write_metrics(step, text);
}

std::optional<std::string> resume_path() {
  const char* path = std::getenv("DL_RESUME_FROM");
  if (path == nullptr || *path == '\0') return std::nullopt;
  return std::string(path);
}

std::string hparams_json() {
  const char* text = std::getenv("DL_HPARAMS");
  if (text == nullptr || *text == '\0') return "{}";
  return text;
}

namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// A dl-search decision file's text (client/decision_file.h), or nullopt while it does not
// exist.
std::optional<std::string> read_decision(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) return std::nullopt;
  char buf[128];
  const std::size_t n = std::fread(buf, 1, sizeof buf, f);
  std::fclose(f);
  return std::string(buf, n);
}

// <DL_SEARCH_DECISIONS>/<trial>.<job>.r<rung>, or "" without them.
std::string decision_path(long long rung) {
  const std::string dir = env_or_empty("DL_SEARCH_DECISIONS");
  const std::string trial = env_or_empty("DL_SEARCH_TRIAL");
  const std::string job = env_or_empty("SLURM_JOB_ID");
  if (dir.empty() || trial.empty() || job.empty() || rung < 0) return "";
  return dir + "/" + decision::file_name(trial, job, rung);
}

// (rung, budget) of this run, followed along the decisions to continue in this job.
std::pair<long long, long long> rung_and_budget() {
  const char* text = std::getenv("DL_MAX_STEPS");
  if (text == nullptr || *text == '\0') return {-1, 0};
  char* end = nullptr;
  errno = 0;
  long long budget = std::strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || budget < 1) {
    throw std::invalid_argument(std::string("dl: DL_MAX_STEPS=") + text +
                                ": expected a whole number of steps >= 1");
  }
  const std::string r = env_or_empty("DL_SEARCH_RUNG");
  long long rung =
      !r.empty() && r.find_first_not_of("0123456789") == std::string::npos ? std::stoll(r) : -1;
  for (;;) {
    const std::string path = decision_path(rung);
    if (path.empty()) break;
    const auto text = read_decision(path);
    const auto next = text ? decision::parse(*text) : std::nullopt;
    if (!next) break;
    rung = next->rung;
    budget = next->budget;
  }
  return {rung, budget};
}

}  // namespace

std::optional<std::int64_t> max_steps() {
  const auto [rung, budget] = rung_and_budget();
  if (budget < 1) return std::nullopt;
  return budget;
}

std::optional<std::int64_t> next_max_steps() {
  const auto [rung, budget] = rung_and_budget();
  const std::string path = decision_path(rung);
  if (budget < 1 || path.empty()) return std::nullopt;
  long long last = 0;
  const std::string rungs = env_or_empty("DL_SEARCH_RUNGS");
  for (std::size_t a = 0; a < rungs.size();) {
    const std::size_t b = std::min(rungs.find(',', a), rungs.size());
    last = std::atoll(rungs.substr(a, b - a).c_str());
    a = b + 1;
  }
  if (last <= budget) return std::nullopt;
  const std::string rank = env_or_empty("RANK");
  if (rank.empty() || rank == "0") {
    const std::string tmp = path + ".wait." + std::to_string(::getpid());
    if (FILE* f = std::fopen(tmp.c_str(), "we")) {
      std::fprintf(f, "%lld\n", budget - 1);
      std::fclose(f);
      ::rename(tmp.c_str(), (path + std::string(decision::kWaitSuffix)).c_str());
    }
  }
  const std::string wait = env_or_empty("DL_SEARCH_WAIT");
  const auto limit = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<long long>(
                         1000 * (wait.empty() ? 3.0 : std::atof(wait.c_str()))));
  auto text = read_decision(path);
  while (!text && std::chrono::steady_clock::now() < limit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    text = read_decision(path);
  }
  if (!text) {
    // No decision in time: "end", unless the driver's came first (link is atomic).
    const std::string tmp = path + ".end." + std::to_string(::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
      if (::write(fd, decision::kEnd.data(), decision::kEnd.size()) < 0) {
      }
      ::fsync(fd);
      ::close(fd);
      if (::link(tmp.c_str(), path.c_str()) != 0 && errno != EEXIST) {
        ::unlink(tmp.c_str());
        return std::nullopt;
      }
      ::unlink(tmp.c_str());
    }
    text = read_decision(path);
  }
  const auto next = text ? decision::parse(*text) : std::nullopt;
  if (!next) return std::nullopt;
  ::setenv("DL_SEARCH_RUNG", std::to_string(next->rung).c_str(), 1);
  ::setenv("DL_MAX_STEPS", std::to_string(next->budget).c_str(), 1);
  return next->budget;
}

void checkpoint_done(std::int64_t step) {
  check_step("checkpoint_done", step);
  Page* p = Channel::get().page();
  if (p == nullptr) return;
  p->done_step.store(step, std::memory_order_release);
  const std::int64_t target = p->target_seq.load(std::memory_order_acquire);
  if (target > 0 && step >= p->target_step.load(std::memory_order_acquire)) {
    p->done_seq.store(target, std::memory_order_release);
  }
}

}  // namespace dl
