#include "launcher/job_launcher.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "core/net.h"
#include "core/process.h"
#include "core/signals.h"
#include "launcher/control.h"
#include "launcher/launch.h"
#include "launcher/program.h"
#include "launcher/resume.h"
#include "launcher/run_end.h"
#include "launcher/slurm_job.h"
#include "launcher/status.h"

namespace dl {
namespace {

using Steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A step's dlrun that reports a lost node says so in its first line, at once; a
// connection that has not within this time is closed.
constexpr auto kReportTimeout = 5s;

// Entries of a comma-separated list such as SLURM_JOB_GPUS ("0,1"); 0 for none.
std::uint32_t count_list(const char* text) {
  if (!text || !*text) return 0;
  std::uint32_t n = 1;
  for (const char* p = text; *p; ++p) n += *p == ',';
  return n;
}

// Neither the user (-n, --ntasks-per-node) nor the site's job_submit/dl laid out the
// tasks, as in salloc: one rank per GPU of --dl-gpus, like a batch job that job_submit/dl
// shaped. nullopt when the job has a layout, or its GPUs do not divide evenly.
std::optional<std::uint32_t> rank_per_gpu(const std::optional<std::uint32_t>& gpus,
                                          std::size_t nodes) {
  if (!gpus || nodes == 0 || *gpus % nodes != 0) return std::nullopt;
  if (std::getenv("SLURM_NTASKS") || std::getenv("SLURM_NTASKS_PER_NODE")) return std::nullopt;
  return static_cast<std::uint32_t>(*gpus / nodes);
}

class Launcher {
 public:
  Launcher(LauncherSettings settings, sys::Fd signals)
      : s_(std::move(settings)), signals_(std::move(signals)) {}

  int run();

 private:
  // Runs one step on `shape` (`reshaped`: nodes were taken out of the job, so srun gets
  // the shape spelt out); returns srun's exit code.
  int run_step(const StepShape& shape, bool reshaped);
  void on_signal(int sig);
  // A failed step: the restart guard, the nodes, and what comes next.
  RecoveryOutcome recover(int code, const StepShape& shape);
  void show(JobPhase phase, const std::string& detail);

  LauncherSettings s_;
  sys::Fd signals_;
  std::optional<Program> srun_;
  std::optional<int> srun_status_;
  // While a step runs, its rank 0 (rank 1 for rank 0's own node) reports a lost rank's
  // node to the launcher's port (see format_lost_node). srun would wait for a dead
  // node's tasks until slurmctld marks the node DOWN (SlurmdTimeout); the launcher
  // checks that the node's slurmd does not answer and ends the step at once.
  void on_report_accept();
  void on_report_readable(std::size_t i, const StepShape& shape);
  void end_step_without(const std::string& node);
  // After srun has ended: the reports already sent (rank 0 sends the culprit or the run's
  // end before its ranks end, so it is in the socket's buffers by then), without waiting
  // for more.
  void drain_reports(const StepShape& shape);
  void resized();
  // On a terminal: what is typed, to srun's stdin (srun is not in the foreground group).
  void feed_stdin();
  bool stdin_open_ = true;
  struct Report {
    sys::Fd fd;
    LineBuffer in;
    Steady::time_point by;
  };
  std::optional<net::Listener> listener_;
  std::string address_;
  std::string key_;
  std::vector<Report> reports_;
  bool srun_killed_ = false;
  // A node was taken out of the job: later steps share the CPUs and GPUs with the failed
  // step, which slurmctld keeps (its tasks are gone) until the node's part reports back.
  bool overlap_ = false;
  bool comment_frozen_ = false;  // see JobSettings::comment_frozen
  bool stopping_ = false;        // SIGINT/SIGTERM: no more steps
  std::uint32_t restarts_here_ = 0;
  std::string batch_host_;
  bool batch_job_ = false;
  // What made the current step fail (rank 0's report), and the culprits of the job's
  // earlier failures when it has no restart history file to keep them in.
  std::optional<Culprit> culprit_;
  std::vector<Culprit> remembered_;
  // How rank 0 ended the current step's run when it did not fail (format_run_end).
  std::optional<int> run_end_;
  std::optional<std::int64_t> ckpt_at_start_;
};

void Launcher::show(JobPhase phase, const std::string& detail) {
  slurm::show_phase(comment_frozen_ ? std::nullopt : s_.job.job, phase, detail);
}

void Launcher::on_signal(int sig) {
  switch (sig) {
    case SIGCHLD:
      if (srun_ && !srun_status_) srun_status_ = srun_->reap();
      break;
    case SIGINT:
      // Ctrl-C in salloc: every rank checkpoints (when it can) and stops, as on Slurm's
      // SIGTERM; srun itself only reports the first Ctrl-C.
      if (!stopping_) log(LogLevel::info, "SIGINT: stopping every rank");
      stopping_ = true;
      try {
        slurm::signal_steps(*s_.job.job, SIGTERM);
      } catch (const std::exception& e) {
        log(LogLevel::warning, "{}", e.what());
        if (srun_) srun_->signal(SIGTERM);
      }
      break;
    case SIGTERM:
      // Slurm signals every step itself (preemption, scancel, the time limit): the ranks
      // checkpoint and requeue; the launcher only starts no new step.
      log(LogLevel::verbose, "SIGTERM: no new step after this one");
      stopping_ = true;
      break;
    default: break;
  }
}

int Launcher::run_step(const StepShape& shape, bool reshaped) {
  EnvChanges changes;
  changes.set.emplace_back("DL_JOB_LAUNCHER", "1");
  changes.set.emplace_back("DL_RESTART_COUNT", std::to_string(s_.job.restart_count));
  if (comment_frozen_) changes.set.emplace_back("DL_JOB_COMMENT_FROZEN", "1");
  if (listener_) {
    changes.set.emplace_back("DL_LAUNCHER_ADDR", address_);
    changes.set.emplace_back("DL_LAUNCHER_PORT", std::to_string(listener_->port));
    changes.set.emplace_back("DL_LAUNCHER_KEY", key_);
  }
  std::vector<std::string> argv{"srun", "--mpi=pmix"};
  if (overlap_) argv.emplace_back("--overlap");
  // The shape spelt out on srun's command line, which overrides the job's variables
  // (they still describe the allocation as it started; Open MPI misread the job's
  // layout when they were rewritten).
  if (reshaped) {
    for (auto& o : step_shape_options(shape)) argv.push_back(std::move(o));
  }
  argv.push_back(s_.dlrun);
  argv.insert(argv.end(), s_.dlrun_args.begin(), s_.dlrun_args.end());
  ProgramSpec spec;
  spec.argv = argv;
  spec.env = apply_env(s_.env, changes);
  spec.capture_output = false;
  // srun gets its own process group, so that only dlrun decides about signals: a
  // terminal's Ctrl-C would also reach srun, whose second Ctrl-C within a second sends
  // SIGINT to the ranks and then kills them in the middle of their checkpoint. On a
  // terminal dlrun passes what is typed on to srun's stdin (srun cannot read a terminal
  // from outside its foreground group).
  spec.own_process_group = true;
  // Only from the foreground: a dlrun started with `&` would be stopped (SIGTTIN).
  const bool feed = stdin_open_ && isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
  spec.stdin_feed = feed;
  srun_status_.reset();
  srun_killed_ = false;
  culprit_.reset();
  run_end_.reset();
  srun_ = Program::start(spec);
  if (feed) {
    const int fd = srun_->stdin_feed().get();
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0)
      throw SystemError(fmt::format("fcntl: {}", std::strerror(errno)));
  }
  log(LogLevel::verbose, "started srun (pid {}) for restart {}", srun_->pid(),
      s_.job.restart_count);
  while (!srun_status_) {
    std::vector<pollfd> fds{{signals_.get(), POLLIN, 0}};
    if (listener_) fds.push_back({listener_->fd.get(), POLLIN, 0});
    for (const auto& r : reports_) fds.push_back({r.fd.get(), POLLIN, 0});
    const bool feeding = feed && stdin_open_ && srun_->stdin_feed();
    if (feeding) fds.push_back({STDIN_FILENO, POLLIN, 0});
    const int n = poll(fds.data(), fds.size(), 250);
    if (feeding && n > 0 && fds.back().revents != 0) {
      feed_stdin();
      fds.pop_back();
    }
    if (n < 0 && errno != EINTR) throw SystemError(fmt::format("poll: {}", std::strerror(errno)));
    signalfd_siginfo si{};
    while (read(signals_.get(), &si, sizeof si) == sizeof si)
      on_signal(static_cast<int>(si.ssi_signo));
    const std::size_t first = listener_ ? 2 : 1;
    for (std::size_t i = first; n > 0 && i < fds.size(); ++i) {
      if (fds[i].revents != 0) on_report_readable(i - first, shape);
    }
    const auto now = Steady::now();
    for (auto& r : reports_) {
      if (now >= r.by) r.fd.reset();
    }
    reports_.erase(
        std::remove_if(reports_.begin(), reports_.end(), [](const Report& r) { return !r.fd; }),
        reports_.end());
    if (listener_ && n > 0 && fds[1].revents != 0) on_report_accept();
    if (!srun_status_) srun_status_ = srun_->reap();
  }
  srun_.reset();
  drain_reports(shape);
  reports_.clear();
  return exit_code_of(*srun_status_);
}

void Launcher::drain_reports(const StepShape& shape) {
  if (!listener_) return;
  for (;;) {
    const std::size_t before = reports_.size();
    on_report_accept();
    if (reports_.size() == before) break;
  }
  // Each connection's line is there or not: a short wait covers a report still on the
  // wire from another node.
  const auto until = Steady::now() + std::chrono::milliseconds(200);
  while (!reports_.empty() && Steady::now() < until) {
    std::vector<pollfd> fds;
    for (const auto& r : reports_) fds.push_back({r.fd.get(), POLLIN, 0});
    if (poll(fds.data(), fds.size(), 50) <= 0) continue;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents != 0) on_report_readable(i, shape);
    }
    reports_.erase(
        std::remove_if(reports_.begin(), reports_.end(), [](const Report& r) { return !r.fd; }),
        reports_.end());
  }
}

void Launcher::feed_stdin() {
  char buf[4096];
  const ssize_t got = read(STDIN_FILENO, buf, sizeof buf);
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (got <= 0) {
    // End of input (Ctrl-D), or dlrun itself no longer in the foreground: srun sees the end.
    stdin_open_ = false;
    srun_->stdin_feed().reset();
    return;
  }
  // What srun does not take at once is dropped rather than blocking the launcher.
  if (send(srun_->stdin_feed().get(), buf, static_cast<std::size_t>(got), MSG_NOSIGNAL) < 0 &&
      errno != EAGAIN && errno != EWOULDBLOCK) {
    srun_->stdin_feed().reset();
  }
}

void Launcher::on_report_accept() {
  std::optional<net::Accepted> a = net::accept_connection(listener_->fd.get());
  if (!a) return;
  // Only a step's ranks know the key; a few connections at once are plenty.
  if (reports_.size() >= 16) reports_.erase(reports_.begin());
  reports_.push_back(Report{std::move(a->fd), {}, Steady::now() + kReportTimeout});
}

void Launcher::on_report_readable(std::size_t i, const StepShape& shape) {
  if (i >= reports_.size()) return;
  Report& r = reports_[i];
  char buf[512];
  const ssize_t got = read(r.fd.get(), buf, sizeof buf);
  if (got <= 0) {
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
    r.fd.reset();
    return;
  }
  std::optional<std::string> line;
  try {
    r.in.append(std::string_view(buf, static_cast<std::size_t>(got)));
    line = r.in.next_line();
  } catch (const SystemError&) {
    r.fd.reset();
    return;
  }
  if (!line) return;
  r.fd.reset();
  if (const auto code = parse_run_end(*line, key_)) {
    run_end_ = code;
    return;
  }
  if (auto culprit = parse_culprit(*line, key_)) {
    // The first culprit of the step counts: a rank 1 standing in for a lost rank 0 may
    // report too. Only a node of the step can be one.
    if (!culprit_ &&
        std::find(shape.nodes.begin(), shape.nodes.end(), culprit->node) != shape.nodes.end()) {
      log(LogLevel::verbose, "the step failed by {}", describe_culprit(*culprit));
      culprit_ = std::move(culprit);
    }
    return;
  }
  const auto node = parse_lost_node(*line, key_);
  if (!node) {
    log(LogLevel::warning, "closed a connection to the launcher's port: not a report of the step");
    return;
  }
  if (srun_killed_ ||
      std::find(shape.nodes.begin(), shape.nodes.end(), *node) == shape.nodes.end()) {
    return;
  }
  // Three checks half a second apart: a node killed a moment ago can still accept a
  // connection while its processes die (seen on a loaded machine: its ranks' sockets were
  // gone, its slurmd's listening socket not yet).
  bool alive = true;
  for (int check = 0; check < 3 && alive; ++check) {
    if (check > 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    try {
      alive = node_answers(*node);
    } catch (const std::exception& e) {
      log(LogLevel::warning, "{} (taking node {} for alive)", e.what(), *node);
    }
  }
  if (alive) {
    log(LogLevel::info, "the step lost its ranks on node {}, whose slurmd still answers", *node);
    return;
  }
  end_step_without(*node);
}

void Launcher::end_step_without(const std::string& node) {
  log(LogLevel::info, "node {} does not answer: ending the step", node);
  // First out of the job: slurmctld then kills the step there at once, and neither
  // kills the job nor leaves it completing on the node when it marks the node DOWN.
  try {
    const slurm::JobInfo info = slurm::load_job(*s_.job.job);
    slurm::remove_node(*s_.job.job, info.nodes, node);
    resized();
  } catch (const std::exception& e) {
    log(LogLevel::warning, "{}", e.what());
  }
  // srun would still wait for the node's tasks: its step's other tasks have ended or
  // end now (their rank 0 lost the node's ranks). They are killed too: a rank's dlrun
  // still telling slurmctld about the failure waits 10 s on the resized job (without
  // slurmdbd), and a requeue completes only when the step has ended.
  srun_killed_ = true;
  if (srun_) srun_->signal(SIGKILL);
  try {
    slurm::signal_steps(*s_.job.job, SIGKILL);
  } catch (const std::exception& e) {
    log(LogLevel::verbose, "{}", e.what());
  }
}

void Launcher::resized() {
  overlap_ = true;
  try {
    comment_frozen_ = slurm::resized_jobs_frozen();
  } catch (const std::exception& e) {
    log(LogLevel::warning, "{}", e.what());
  }
  if (comment_frozen_) {
    log(LogLevel::info,
        "slurmctld keeps no accounting: Slurm accepts no update of a resized job, so the "
        "status line is only logged from now on");
  }
}

RecoveryOutcome Launcher::recover(int code, const StepShape& shape) {
  RecoveryOutcome r;
  // Which of the step's nodes failed: their slurmd does not answer (slurmctld will only
  // know after SlurmdTimeout).
  std::vector<std::string> dead;
  for (const auto& n : shape.nodes) {
    bool alive = true;
    try {
      alive = node_answers(n);
    } catch (const std::exception& e) {
      log(LogLevel::warning, "{} (taking node {} for alive)", e.what(), n);
    }
    if (!alive) dead.push_back(n);
  }
  // A node that caused the job's last two failures is taken out like a failed one; the
  // batch host cannot leave the allocation the launcher runs in, so the job is requeued
  // without it.
  CulpritVerdict verdict = judge_run_culprit(s_.job, culprit_, remembered_);
  remembered_ = verdict.recent;
  const bool exclude_batch_host = verdict.exclude && *verdict.exclude == batch_host_;
  const bool only_excluded = verdict.exclude && !exclude_batch_host && dead.empty();
  if (verdict.exclude && !exclude_batch_host &&
      std::find(dead.begin(), dead.end(), *verdict.exclude) == dead.end()) {
    dead.push_back(*verdict.exclude);
  }
  RecoveryPlan plan =
      plan_recovery(shape, dead, s_.elastic, only_excluded ? "is excluded" : "failed");
  if (exclude_batch_host) {
    plan.in_allocation = false;
    plan.why = fmt::format("node {} runs the batch script: requeued without it", batch_host_);
  }
  // An interactive allocation (salloc) cannot be requeued: without the node it would end,
  // so it keeps the node and restarts as before.
  if (verdict.exclude && !plan.in_allocation && !batch_job_ &&
      (only_excluded || exclude_batch_host)) {
    log(LogLevel::warning,
        "{}, but the job cannot be requeued without it (not a batch job): "
        "restarting on the same nodes",
        verdict.why.substr(0, verdict.why.rfind(';')));
    verdict.exclude.reset();
    verdict.why.clear();
    plan = plan_recovery(shape, {}, s_.elastic);
  }
  if (!plan.dead.empty()) log(LogLevel::info, "{}", plan.why);
  RunEnding ending;
  ending.end = RunEnd::failed;
  ending.code = code;
  ending.why = fmt::format("step failed (exit code {})", code);
  ending.ckpt_at_start = ckpt_at_start_;
  if (!plan.dead.empty()) ending.lost_node = plan.dead.front();
  ending.in_allocation = plan.in_allocation;
  ending.verdict = verdict;
  const RunOutcome out =
      conclude_run(s_.job, s_.max_stalled_restarts, ending,
                   [this](JobPhase phase, const std::string& detail) { show(phase, detail); });
  r.exit_code = out.exit_code;
  if (!out.restart_here) return r;
  ckpt_at_start_ = out.newest_ckpt;
  // Nodes that failed leave the job before anything else: then Slurm neither kills the
  // job when it marks them DOWN nor keeps it completing there (see dlrun(1)).
  for (const auto& d : plan.dead) {
    try {
      const slurm::JobInfo info = slurm::load_job(*s_.job.job);
      const auto nodes = slurm::expand_nodes(info.nodes);
      if (std::find(nodes.begin(), nodes.end(), d) != nodes.end()) {
        slurm::remove_node(*s_.job.job, info.nodes, d);
        resized();
      }
    } catch (const std::exception& e) {
      log(LogLevel::error, "{}", e.what());
      r.exit_code = kExitLost;
      return r;
    }
  }
  if (!plan.dead.empty()) show(JobPhase::restarting, plan.why + "; " + out.detail);
  r.next = plan.shape;
  return r;
}

int Launcher::run() {
  const slurm::JobInfo info = slurm::load_job(*s_.job.job);
  batch_host_ = info.batch_host;
  batch_job_ = info.batch;
  try {
    address_ = net::host_address();
    listener_ = net::listen_on_any_port(address_);
    key_ = new_step_secret();
  } catch (const SystemError& e) {
    listener_.reset();
    log(LogLevel::warning, "{} (a node that fails is noticed only when Slurm marks it DOWN)",
        e.what());
  }
  StepShape shape;
  shape.nodes = slurm::expand_nodes(info.nodes);
  // An elastic job has no task count (its node count varies): one rank per GPU, its
  // steps spelt out. Any other job's steps take the job's own layout.
  bool reshaped = false;
  if (const char* t = std::getenv("SLURM_TASKS_PER_NODE")) {
    if (const auto k = first_node_tasks(t)) shape.tasks_per_node = *k;
  }
  if (s_.elastic && !std::getenv("SLURM_NTASKS_PER_NODE")) {
    if (const auto gpus = count_list(std::getenv("SLURM_JOB_GPUS"))) shape.tasks_per_node = gpus;
    reshaped = true;
  } else if (const auto per_gpu = rank_per_gpu(s_.gpus, shape.nodes.size())) {
    shape.tasks_per_node = *per_gpu;
    reshaped = true;
  }
  if (!s_.job.ckpt_dir.empty()) {
    try {
      if (const auto r = newest_checkpoint(s_.job.ckpt_dir, CheckLevel::quick)) {
        ckpt_at_start_ = r->step;
      }
    } catch (const std::exception& e) {
      log(LogLevel::verbose, "{}", e.what());
    }
  }
  for (;;) {
    const auto started = Steady::now();
    int code = run_step(shape, reshaped);
    if (run_end_ && code != *run_end_) {
      // Rank 0 had ended the run; what ended the step later was a consequence (a program
      // whose peers were gone before it, see format_run_end).
      log(LogLevel::info,
          "the step ended with exit code {} after rank 0 had ended the run with exit code {}: "
          "exit code {}",
          code, *run_end_, *run_end_);
      code = *run_end_;
    }
    const auto took = std::chrono::duration_cast<std::chrono::seconds>(Steady::now() - started);
    const StepEnd end = classify_step_exit(code);
    if (end != StepEnd::failed) return code;
    if (stopping_) {
      log(LogLevel::info, "the step ended with exit code {} after a stop: no restart", code);
      return code;
    }
    log(LogLevel::info, "the step ended with exit code {} after {}s", code, took.count());
    const RecoveryOutcome r = recover(code, shape);
    if (!r.next) return r.exit_code;
    reshaped = reshaped || r.next->nodes != shape.nodes;
    shape = *r.next;
    ++restarts_here_;
    ++s_.job.restart_count;
    log(LogLevel::info, "restart {} inside the allocation (DL_RESTART_COUNT={}) on {}",
        restarts_here_, s_.job.restart_count, fmt::join(shape.nodes, ","));
  }
}

}  // namespace

int run_job_launcher(LauncherSettings settings, sys::Fd signals) {
  Launcher l(std::move(settings), std::move(signals));
  return l.run();
}

}  // namespace dl
