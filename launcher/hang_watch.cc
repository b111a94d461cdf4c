#include "launcher/hang_watch.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string_view>

#include "core/error.h"
#include "core/log.h"
#include "core/process.h"
#include "core/sysio.h"
#include "launcher/program.h"

extern char** environ;

namespace dl {
namespace {

using namespace std::chrono_literals;

// A rank's step reaches rank 0 at most this often (and within a tick of moving).
constexpr auto kProgressInterval = 1s;
// gdb's bound per stalled program, and rank 0's for all of them to arrive.
constexpr auto kStacksTimeout = 30s;
constexpr auto kCollectTimeout = kStacksTimeout + 15s;
// The stacks of this many stalled ranks at most (the first stalled first).
constexpr std::size_t kMaxDumps = 8;
// Per program: a stack line and all of its stacks.
constexpr std::size_t kMaxTraceLine = 2000;
constexpr std::size_t kMaxTraceBytes = 1 << 20;

std::string exe_of(pid_t pid) {
  char buf[PATH_MAX];
  const std::string link = fmt::format("/proc/{}/exe", pid);
  const ssize_t n = readlink(link.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<std::size_t>(n));
}

// The Python frames of every thread, through the classes of the interpreter's gdb extension
// (python3-dbg). Its own py-bt reads the frame from a variable that Python 3.13's optimised
// build leaves out ("unable to read python frame information"); each thread state's
// current frame is always there (3.11 and 3.12 keep it in cframe). Printed as py-bt does.
constexpr const char* kPythonStacks = R"py(def dl_python_stacks():
    try:
        interp = gdb.parse_and_eval("_PyRuntime.interpreters.head")
    except gdb.error as e:
        print("(no Python frames: %s)" % e)
        return
    while interp:
        t = interp["threads"]["head"]
        while t:
            print("Python thread %d, most recent call first:" % int(t["native_thread_id"]))
            fields = [f.name for f in t.type.target().fields()]
            f = t["current_frame"] if "current_frame" in fields else t["cframe"]["current_frame"]
            while f:
                p = PyFramePtr(f)
                if not getattr(p, "is_shim", lambda: False)():
                    print('  File "%s", line %s, in %s' % (p.filename(), p.current_line_num(), p.co_name.proxyval(set())))
                f = f["previous"]
            t = t["next"]
        interp = interp["next"]
try:
    dl_python_stacks()
except Exception as e:
    print("(no Python frames: %s)" % e))py";

// gdb's "python" command takes one line: the script as a string literal, run by exec.
std::string python_command(std::string_view script) {
  std::string literal;
  for (const char c : script) {
    if (c == '\n') {
      literal += "\\n";
    } else {
      if (c == '\\' || c == '\'') literal += '\\';
      literal += c;
    }
  }
  return fmt::format("python exec('{}')", literal);
}

bool is_python(const std::string& exe) {
  const std::string base = exe.substr(exe.rfind('/') + 1);
  return base.rfind("python", 0) == 0;
}

}  // namespace

Stacks collect_stacks(pid_t pid, std::chrono::seconds timeout) {
  Stacks s;
  const std::string exe = exe_of(pid);
  ProgramSpec spec;
  // -nx: no user's gdbinit; the python extension of Debian's python3-dbg is auto-loaded
  // for the interpreter (and libpython) from /usr/share/gdb/auto-load.
  spec.argv = {"gdb",
               "-batch",
               "-nx",
               "-p",
               std::to_string(pid),
               "-iex",
               "add-auto-load-safe-path /usr/share/gdb/auto-load",
               "-ex",
               "set pagination off",
               "-ex",
               "thread apply all bt"};
  if (is_python(exe)) {
    spec.argv.insert(spec.argv.end(), {"-ex", python_command(kPythonStacks)});
  }
  for (char** e = environ; *e; ++e) spec.env.emplace_back(*e);
  spec.capture_output = true;
  spec.own_process_group = true;
  std::optional<Program> gdb;
  try {
    gdb = Program::start(spec);
  } catch (const SystemError& e) {
    s.how = fmt::format("{} (install Debian's gdb, and python3-dbg for Python frames)", e.what());
    return s;
  }
  s.text = fmt::format("== stacks of pid {} ({}) ==\n", pid, exe.empty() ? "?" : exe);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  sys::Fd& out = gdb->stdout_pipe();
  sys::Fd& err = gdb->stderr_pipe();
  bool timed_out = false;
  while (out || err) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left <= 0ms) {
      timed_out = true;
      break;
    }
    std::vector<pollfd> fds;
    if (out) fds.push_back({out.get(), POLLIN, 0});
    if (err) fds.push_back({err.get(), POLLIN, 0});
    const int n = poll(fds.data(), fds.size(), static_cast<int>(left.count()) + 1);
    if (n < 0 && errno != EINTR) break;
    for (const pollfd& p : fds) {
      if (p.revents == 0) continue;
      char buf[8192];
      const ssize_t r = read(p.fd, buf, sizeof buf);
      if (r > 0) {
        if (s.text.size() < kMaxTraceBytes) s.text.append(buf, static_cast<std::size_t>(r));
      } else if (r == 0 || errno != EINTR) {
        (p.fd == out.get() ? out : err).reset();
      }
    }
  }
  if (timed_out) gdb->signal(SIGKILL);
  std::optional<int> status;
  // After SIGKILL (or the end of its output) gdb is gone within moments.
  for (int i = 0; i < 200 && !status; ++i) {
    status = gdb->reap();
    if (!status) usleep(10'000);
  }
  if (!status) {
    gdb->signal(SIGKILL);
    status = gdb->reap();
  }
  if (timed_out) {
    s.how = fmt::format("gdb did not finish within {}s and was killed", timeout.count());
  } else if (status && *status == 0) {
    s.ok = true;
    s.how = "collected with gdb";
  } else {
    s.how = fmt::format("gdb {}", status ? describe_wait_status(*status) : "did not exit");
  }
  return s;
}

namespace {

// The processes whose process group is `leader`'s, the leader first.
std::vector<pid_t> group_members(pid_t leader, std::size_t max) {
  std::vector<pid_t> out{leader};
  std::vector<pid_t> others;
  try {
    for (const std::string& name : sys::list_dir("/proc")) {
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      const pid_t pid = static_cast<pid_t>(std::stol(name));
      if (pid == leader) continue;
      // procfs files have no size: read as a stream (empty when the process is gone).
      std::ifstream in("/proc/" + name + "/stat");
      std::string stat;
      std::getline(in, stat);
      // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
      const std::size_t close = stat.rfind(')');
      if (close == std::string::npos) continue;
      int ppid = 0;
      int pgrp = 0;
      char state = 0;
      if (std::sscanf(stat.c_str() + close + 1, " %c %d %d", &state, &ppid, &pgrp) == 3 &&
          pgrp == leader) {
        others.push_back(pid);
      }
    }
  } catch (const std::exception& e) {
    log(LogLevel::verbose, "couldn't list the program's processes: {}", e.what());
  }
  std::sort(others.begin(), others.end());
  for (const pid_t pid : others) {
    if (out.size() >= max) break;
    out.push_back(pid);
  }
  return out;
}

}  // namespace

Stacks collect_program_stacks(pid_t program, std::chrono::seconds timeout) {
  Stacks all;
  all.ok = true;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const pid_t pid : group_members(program, 4)) {
    const auto left = std::chrono::duration_cast<std::chrono::seconds>(
        deadline - std::chrono::steady_clock::now());
    if (left < 1s) {
      all.ok = false;
      all.how += fmt::format("{}no time left for pid {}", all.how.empty() ? "" : "; ", pid);
      break;
    }
    const Stacks s = collect_stacks(pid, left);
    all.text += s.text;
    all.ok = all.ok && s.ok;
    if (!s.ok || all.how.empty()) {
      all.how += fmt::format("{}{}{}", all.how.empty() ? "" : "; ", s.how,
                             s.ok ? "" : fmt::format(" (pid {})", pid));
    }
  }
  return all;
}

HangWatch::HangWatch(std::chrono::seconds limit, std::uint32_t rank, std::uint32_t world_size,
                     std::string report_dir, std::string label, Hooks hooks)
    : limit_(limit),
      rank_(rank),
      report_dir_(std::move(report_dir)),
      label_(std::move(label)),
      hooks_(std::move(hooks)),
      nodes_(world_size) {
  if (rank_ == 0) watchdog_.emplace(limit, world_size);
}

void HangWatch::set_node(std::uint32_t rank, std::string node) {
  if (rank < nodes_.size()) nodes_[rank] = std::move(node);
}

void HangWatch::tick(const channel::Page* page, std::optional<pid_t> program,
                     std::optional<std::uint64_t> round, Steady::time_point now) {
  std::int64_t step = -1;
  if (page && program && page->attached.load(std::memory_order_acquire) != 0) {
    step = page->step.load(std::memory_order_acquire);
  }
  bool checkpointing = false;
  if (round && step >= 0) {
    const auto seq = static_cast<std::int64_t>(*round);
    checkpointing = page->frozen_seq.load(std::memory_order_acquire) == seq ||
                    (page->target_seq.load(std::memory_order_acquire) == seq &&
                     step >= page->target_step.load(std::memory_order_acquire));
  }
  if (step != step_) {
    step_ = step;
    step_changed_ = now;
  }
  if (rank_ != 0) {
    // How long ago the step moved goes with it, so that rank 0 dates it right although
    // it hears of it up to kProgressInterval later.
    if (step >= 0 && (step != sent_step_ || checkpointing) && now >= next_send_) {
      Message m;
      m.kind = MsgKind::progress;
      m.step = step;
      m.flag = checkpointing;
      m.seq = static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(now - step_changed_).count());
      hooks_.send_up(m);
      sent_step_ = step;
      next_send_ = now + kProgressInterval;
    }
    return;
  }
  if (!program) watchdog_->exited(0);
  watchdog_->report(0, step, step_changed_);
  if (checkpointing) watchdog_->busy(0, now);
  if (phase_ == Phase::watching) {
    if (const auto hang = watchdog_->check(now)) declare(*hang, program, now);
  }
  if (phase_ == Phase::collecting && (how_.size() == traces_.size() || now >= collect_by_)) {
    finish();
  }
}

bool HangWatch::on_message(std::uint32_t rank, const Message& m, Steady::time_point now) {
  switch (m.kind) {
    case MsgKind::progress:
      watchdog_->report(
          rank, m.step,
          now - std::chrono::milliseconds(std::min<std::uint64_t>(m.seq, 24 * 3600 * 1000)));
      return true;
    case MsgKind::exit: watchdog_->exited(rank); return false;
    case MsgKind::trace:
      if (phase_ == Phase::collecting && traces_.count(rank) && !how_.count(rank)) {
        add_trace(rank, m.text + "\n");
      }
      return true;
    case MsgKind::traced:
      if (phase_ == Phase::collecting && traces_.count(rank)) how_.emplace(rank, m.text);
      return true;
    default: return false;
  }
}

void HangWatch::add_trace(std::uint32_t rank, const std::string& text) {
  std::string& t = traces_[rank];
  if (t.size() < kMaxTraceBytes) t += text;
}

void HangWatch::declare(const Hang& hang, std::optional<pid_t> program, Steady::time_point now) {
  phase_ = Phase::collecting;
  culprit_ = hang.stalled.front().rank;
  verdict_ = describe_hang(hang, nodes_, limit_);
  log(LogLevel::error, "{}", verdict_.substr(0, verdict_.find('\n')));
  log(LogLevel::info, "collecting the stacks of the stalled program(s) before stopping the run");
  collect_by_ = now + kCollectTimeout;
  for (std::size_t i = 0; i < hang.stalled.size() && i < kMaxDumps; ++i) {
    traces_[hang.stalled[i].rank];
  }
  for (auto& [r, text] : traces_) {
    if (r != 0) {
      Message m;
      m.kind = MsgKind::dump;
      m.text = "hang watchdog";
      hooks_.send_to_rank(r, m);
    }
  }
  if (traces_.count(0)) {
    if (program) {
      const Stacks s = collect_program_stacks(*program, kStacksTimeout);
      add_trace(0, s.text);
      how_.emplace(0, s.how);
    } else {
      how_.emplace(0, "the program had exited");
    }
  }
}

void HangWatch::on_dump(std::optional<pid_t> program) {
  Message done;
  done.kind = MsgKind::traced;
  if (!program) {
    done.flag = true;
    done.text = "the program had exited";
    hooks_.send_up(done);
    return;
  }
  log(LogLevel::info, "the hang watchdog asks for the stacks of pid {}", *program);
  const Stacks s = collect_program_stacks(*program, kStacksTimeout);
  std::size_t pos = 0;
  while (pos < s.text.size()) {
    std::size_t nl = s.text.find('\n', pos);
    if (nl == std::string::npos) nl = s.text.size();
    Message m;
    m.kind = MsgKind::trace;
    m.text = s.text.substr(pos, std::min(nl - pos, kMaxTraceLine));
    hooks_.send_up(m);
    pos = nl + 1;
  }
  done.flag = !s.ok;
  done.text = s.how;
  hooks_.send_up(done);
}

void HangWatch::finish() {
  phase_ = Phase::done;
  std::string report = verdict_;
  for (const auto& [r, text] : traces_) {
    const auto how = how_.find(r);
    report += fmt::format("\n=== rank {} on {}: {} ===\n", r, nodes_[r].empty() ? "?" : nodes_[r],
                          how == how_.end() ? "its stacks did not arrive in time" : how->second);
    report += text;
  }
  std::string where;
  if (!report_dir_.empty()) {
    try {
      const sys::Fd dir = sys::open_dir(report_dir_);
      const sys::Fd file =
          sys::create_unique_at(dir, fmt::format("hang-{}-", label_), O_WRONLY | O_CLOEXEC, 0600);
      sys::write_all_at(file, report.data(), report.size(), 0);
      sys::fsync_fd(file);
      where = file.path();
    } catch (const std::exception& e) {
      log(LogLevel::warning, "couldn't write the hang report into {}: {}", report_dir_, e.what());
    }
  }
  if (where.empty()) {
    log(LogLevel::error, "hang report (no job directory to keep it in):\n{}", report);
    where = "the log above";
  } else {
    log(LogLevel::error, "hang report: {}", where);
  }
  hooks_.fail(culprit_, fmt::format("hung (no step for {}s, --dl-watchdog); report: {}",
                                    limit_.count(), where));
}

}  // namespace dl
