#include "launcher/supervisor.h"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>

#include "core/error.h"
#include "core/log.h"
#include "core/net.h"
#include "core/node_down.h"
#include "core/process.h"
#include "core/signals.h"
#include "core/step_files.h"
#include "launcher/agreement.h"
#include "launcher/channel_file.h"
#include "launcher/control.h"
#include "launcher/coordinator.h"
#include "launcher/dlrun_job_control.h"
#include "launcher/hang_watch.h"
#include "launcher/launch.h"
#include "launcher/nvml.h"
#include "launcher/pmix_session.h"
#include "launcher/program.h"
#include "launcher/rank_log.h"
#include "launcher/rank_server.h"
#include "launcher/recovery.h"
#include "launcher/run_end.h"
#include "launcher/status.h"

namespace dl {
namespace {

using Steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

// After END, rank 0 waits this long beyond kill_wait for the other ranks to hang up, so
// that its last message is not lost when it exits.
constexpr auto kHangupWait = 5s;

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // our own stdout is gone: nothing better to do with the output
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

// Rank != 0: its connection to rank 0.
struct Upstream {
  sys::Fd fd;
  LineBuffer in;
};

// What one rank does in a checkpoint round.
struct LocalRound {
  std::uint64_t seq = 0;
  Steady::time_point started;
  bool answered = false;
  bool has_target = false;
  bool done_sent = false;
};

class Supervisor {
 public:
  Supervisor(const SupervisorOptions& options, const JobSettings& job, Bootstrap boot,
             Inherited inherited, sys::Fd signals)
      : options_(options),
        job_(job),
        boot_(std::move(boot)),
        inherited_(std::move(inherited)),
        signals_(std::move(signals)),
        rank_(boot_.layout.rank),
        coordinator_rank_(rank_ == 0) {}

  int run();

 private:
  void start_program();
  void connect_to_rank0();
  void start_watch();
  void loop();

  // Events.
  void on_signal(int sig);
  void on_program_output(sys::Fd& pipe, LinePrefixer& prefixer);
  void on_program_exit(int status);
  void on_rank0_readable();
  void lost_rank0(const std::string& why);
  void show_status_without_rank0(JobPhase phase, const std::string& detail);
  void on_rank_message(std::uint32_t rank, const Message& m);
  void tick(Steady::time_point now);

  // This rank's side of the protocol.
  void handle(const Message& m);
  void send_up(const Message& m);
  void broadcast(const Message& m);
  void send_to(std::uint32_t rank, const Message& m);
  void answer_round(bool frozen, std::int64_t step);
  // Answers the round from the program's page once it is due (`exited`: now) and reports
  // its checkpoint done.
  void report_round(Steady::time_point now, bool exited);
  void end_program(int code, const std::string& why);

  SupervisorOptions options_;
  JobSettings job_;
  Bootstrap boot_;
  Inherited inherited_;
  sys::Fd signals_;
  std::uint32_t rank_;
  bool coordinator_rank_;

  std::optional<ChannelFile> channel_;
  std::optional<Program> program_;
  // The program's output pipes outlive it: what it wrote last is still to be read.
  sys::Fd out_pipe_;
  sys::Fd err_pipe_;
  std::unique_ptr<LinePrefixer> out_prefixer_;
  std::unique_ptr<LinePrefixer> err_prefixer_;
  std::optional<LocalRound> round_;

  std::optional<int> end_code_;  // END received: stop the program, then exit with this
  Steady::time_point kill_at_;
  bool killed_ = false;
  bool got_sigterm_ = false;  // Slurm's SIGTERM: with --ckpt-signal=TERM the program has it

  // Whether the program gets --ckpt-signal when a round's step is agreed. SIGTERM stops
  // it, so only in a round that ends the run, and not again after Slurm's own.
  bool wants_ckpt_signal(bool stop_round) const {
    if (options_.ckpt_signal == SIGTERM) return stop_round && !got_sigterm_;
    return options_.ckpt_signal != 0;
  }
  Steady::time_point hangup_deadline_;

  // Rank != 0: the connection to rank 0.
  std::optional<Upstream> up_;
  // Rank 0: the other ranks, and messages between rank 0's two roles.
  std::optional<RankServer> ranks_;
  std::unique_ptr<DlrunJobControl> control_;
  std::unique_ptr<Coordinator> coordinator_;
  std::deque<Message> to_coordinator_;
  std::deque<Message> to_self_;
  std::unique_ptr<HangWatch> watch_;  // --dl-watchdog

  // The node's first rank: the step's GPUs on this node (--gpu-interval).
  void start_gpu_sampling();
  std::optional<Nvml> nvml_;
  Steady::time_point next_gpu_sample_;
};

int Supervisor::run() {
  if (coordinator_rank_) {
    // Every rank is connected before any program starts, so that no message of rank 0
    // (a checkpoint round, the end of the run) can miss a rank.
    ranks_.emplace(std::move(*boot_.control), boot_.rendezvous.secret, boot_.layout.world_size);
    boot_.control.reset();
    ranks_->accept_all();
  } else {
    connect_to_rank0();
  }
  start_program();
  if (coordinator_rank_) {
    control_ = std::make_unique<DlrunJobControl>(job_, options_.max_stalled_restarts, *channel_);
    std::optional<Coordinator::Resumed> resumed;
    if (boot_.resume) resumed = Coordinator::Resumed{boot_.resume->step, boot_.resume->written};
    coordinator_ =
        std::make_unique<Coordinator>(options_, job_, boot_.layout.world_size, resumed, *control_,
                                      [this](const Message& m) { broadcast(m); });
    coordinator_->set_send_to([this](std::uint32_t rank, const Message& m) { send_to(rank, m); });
    coordinator_->set_node(0, boot_.rendezvous.node);
    for (const auto& [rank, node] : ranks_->nodes()) coordinator_->set_node(rank, node);
    coordinator_->start(Steady::now());
  }
  if (job_.watchdog.count() > 0) start_watch();
  if (options_.gpu_interval.count() > 0 && boot_.layout.local_rank == 0) start_gpu_sampling();
  if (coordinator_) {
    RankServer::Handlers handlers;
    handlers.message = [this](std::uint32_t rank, const Message& m) { on_rank_message(rank, m); };
    handlers.lost = [this](std::uint32_t rank, const std::string& node, const std::string& why) {
      coordinator_->on_rank_lost(rank, node, why, Steady::now());
    };
    ranks_->start(std::move(handlers));
  }
  loop();
  boot_.pmix.reset();
  return *end_code_;
}

void Supervisor::connect_to_rank0() {
  const Rendezvous& r = boot_.rendezvous;
  up_.emplace();
  up_->fd = net::connect_tcp(r.master_addr, r.control_port, 10s);
  Message hello;
  hello.kind = MsgKind::hello;
  hello.rank = rank_;
  hello.key = r.secret;
  hello.text = job_.node;
  net::send_all(up_->fd.get(), format_message(hello));
}

void Supervisor::start_gpu_sampling() {
  const std::vector<unsigned> gpus =
      slurm_gpu_indices(std::getenv("SLURM_STEP_GPUS"), std::getenv("SLURM_JOB_GPUS"));
  if (gpus.empty()) return;
  std::string why;
  nvml_ = Nvml::load(gpus, why);
  if (!nvml_) log(LogLevel::verbose, "no GPU figures: {}", why);
}

void Supervisor::start_watch() {
  HangWatch::Hooks hooks;
  hooks.send_up = [this](const Message& m) { send_up(m); };
  hooks.send_to_rank = [this](std::uint32_t rank, const Message& m) {
    if (ranks_) ranks_->send(rank, m);
  };
  // A hang ends the run exactly as a failure of the stalled rank's program does.
  hooks.fail = [this](std::uint32_t rank, const std::string& how) {
    Message m;
    m.kind = MsgKind::exit;
    m.code = kExitHung;
    m.text = how;
    coordinator_->on_message(rank, m, Steady::now());
  };
  std::string dir = job_.ckpt_dir;
  for (const std::string& var : inherited_.env) {
    if (dir.empty() && var.rfind("DL_EXP_JOURNALS=", 0) == 0) dir = var.substr(16);
  }
  watch_ = std::make_unique<HangWatch>(
      job_.watchdog, rank_, boot_.layout.world_size, dir,
      fmt::format("{}.{}", job_.job ? job_.job->to_string() : "0", job_.restart_count),
      std::move(hooks));
  watch_->set_node(0, boot_.rendezvous.node);
  if (ranks_) {
    for (const auto& [rank, node] : ranks_->nodes()) watch_->set_node(rank, node);
  }
}

void Supervisor::start_program() {
  const char* step = getenv("SLURM_STEP_ID");
  // A random suffix keeps names unique (a job id comes back after a cluster restart,
  // and a dlrun killed with SIGKILL leaves its file behind until the step's end, when
  // slurmstepd's SPANK plugin removes it: core/step_files.h) and unguessable.
  channel_.emplace(ChannelFile::create(
      channel_file_stem(job_.job ? job_.job->to_string() : "0", step ? step : "0", rank_)));
  TaskContext task;
  task.layout = boot_.layout;
  task.rendezvous = boot_.rendezvous;
  task.restart_count = job_.restart_count;
  task.ckpt_dir = job_.ckpt_dir;
  task.client_file = channel_->path();
  try {
    task.socket_ifname =
        net::interface_of(net::local_address_towards(boot_.rendezvous.master_addr));
  } catch (const SystemError& e) {
    log(LogLevel::verbose, "no socket interface for GLOO/NCCL_SOCKET_IFNAME: {}", e.what());
  }
  EnvChanges changes = program_env(task);
  changes.set.emplace_back(pmix::kStoreVariable, pmix::kStoreValue);
  if (job_.watchdog.count() > 0) {
    for (auto& d : collective_watchdog_defaults(job_.watchdog)) changes.defaults.push_back(d);
  }
  ProgramSpec spec;
  spec.argv = options_.command;
  spec.env = apply_env(inherited_.env, changes);
  spec.pass_fds = inherited_.fds;
  spec.ignored_signals = {SIGINT, SIGUSR1, SIGUSR2};
  // --ckpt-signal=TERM: the program stops on SIGTERM as it would without dlrun (Slurm's
  // own reaches it), saving what it keeps in its handler, if it has one.
  if (options_.ckpt_signal != SIGTERM) spec.ignored_signals.push_back(SIGTERM);
  const bool tty = isatty(STDOUT_FILENO) || isatty(STDERR_FILENO);
  spec.capture_output = options_.prefix_output && (options_.capture_on_tty || !tty);
  spec.own_process_group = !isatty(STDIN_FILENO);
  program_ = Program::start(spec);
  log(LogLevel::verbose,
      "started '{}' (pid {}): RANK={} WORLD_SIZE={} MASTER_ADDR={} MASTER_PORT={}",
      options_.command.front(), program_->pid(), rank_, boot_.layout.world_size,
      boot_.rendezvous.master_addr, boot_.rendezvous.master_port);
  if (spec.capture_output) {
    out_pipe_ = std::move(program_->stdout_pipe());
    err_pipe_ = std::move(program_->stderr_pipe());
    const std::string prefix = rank_prefix(rank_, job_.node);
    out_prefixer_ = std::make_unique<LinePrefixer>(
        prefix, [](std::string_view line) { write_all(STDOUT_FILENO, line); });
    err_prefixer_ = std::make_unique<LinePrefixer>(
        prefix, [](std::string_view line) { write_all(STDERR_FILENO, line); });
  }
}

void Supervisor::send_up(const Message& m) {
  if (coordinator_rank_) {
    to_coordinator_.push_back(m);
    return;
  }
  if (!up_) return;
  try {
    net::send_all(up_->fd.get(), format_message(m));
  } catch (const SystemError& e) {
    log(LogLevel::verbose, "{}", e.what());
  }
}

void Supervisor::send_to(std::uint32_t rank, const Message& m) {
  if (rank == 0) {
    to_self_.push_back(m);
    return;
  }
  if (ranks_) ranks_->send(rank, m);
}

void Supervisor::broadcast(const Message& m) {
  if (ranks_) ranks_->broadcast(m);
  to_self_.push_back(m);
}

void Supervisor::answer_round(bool frozen, std::int64_t step) {
  round_->answered = true;
  Message m;
  m.kind = MsgKind::step;
  m.seq = round_->seq;
  m.flag = frozen;
  m.step = step;
  send_up(m);
}

void Supervisor::handle(const Message& m) {
  channel::Page& page = channel_->page();
  switch (m.kind) {
    case MsgKind::prepare:
      round_ = LocalRound{m.seq, Steady::now()};
      page.request_seq.store(static_cast<std::int64_t>(m.seq), std::memory_order_release);
      if (!program_) answer_round(false, -1);
      break;
    case MsgKind::target:
      if (!round_ || round_->seq != m.seq) break;
      round_->has_target = true;
      page.target_step.store(m.step, std::memory_order_release);
      page.stopping.store(m.flag ? 1 : 0, std::memory_order_release);
      page.target_seq.store(static_cast<std::int64_t>(m.seq), std::memory_order_release);
      if (program_ && wants_ckpt_signal(m.flag)) program_->signal(options_.ckpt_signal);
      break;
    case MsgKind::stop_after: page.stopping.store(1, std::memory_order_release); break;
    case MsgKind::end: end_program(m.code, m.text); break;
    case MsgKind::dump:
      if (watch_) watch_->on_dump(program_ ? std::optional(program_->pid()) : std::nullopt);
      break;
    default: log(LogLevel::warning, "unexpected message from rank 0: {}", format_message(m));
  }
}

void Supervisor::end_program(int code, const std::string& why) {
  if (end_code_) return;
  end_code_ = code;
  log(LogLevel::verbose, "ending ({}), exit code {}", why, code);
  const auto now = Steady::now();
  hangup_deadline_ = now + options_.kill_wait + kHangupWait;
  if (program_) {
    // Programs that installed a handler get SIGTERM and kill_wait to exit; the rest
    // ignore it (dlrun started them with SIGTERM ignored, against Slurm's own) and get
    // SIGKILL at once: waiting cannot help them, and their state is either saved (the
    // checkpoint that ended the run) or lost anyway (a failed run).
    program_->signal(SIGTERM);
    kill_at_ = program_->ignores(SIGTERM) ? now : now + options_.kill_wait;
  }
}

void Supervisor::on_signal(int sig) {
  switch (sig) {
    case SIGCHLD:
      if (program_) {
        if (const auto status = program_->reap()) on_program_exit(*status);
      }
      break;
    case SIGCONT:
      if (coordinator_) coordinator_->on_resumed();
      break;
    case SIGTERM:
    case SIGINT:
    case SIGUSR2:
    case SIGUSR1: {
      const bool stop = sig != SIGUSR1;
      if (sig == SIGTERM) got_sigterm_ = true;
      log(LogLevel::verbose, "got {}: asking for a checkpoint{}", signal_name(sig),
          stop ? " and a requeue" : "");
      Message m;
      m.kind = MsgKind::want;
      m.flag = stop;
      m.text = signal_name(sig);
      send_up(m);
      break;
    }
    default: break;
  }
}

void Supervisor::report_round(Steady::time_point now, bool exited) {
  if (!round_) return;
  const channel::Page& page = channel_->page();
  if (!round_->answered) {
    const std::int64_t step = page.attached.load(std::memory_order_acquire) == 0
                                  ? kNoClientApi
                                  : page.step.load(std::memory_order_acquire);
    const bool frozen =
        page.frozen_seq.load(std::memory_order_acquire) == static_cast<std::int64_t>(round_->seq);
    // A program that never reported a step does not use the client API: no wait.
    if (exited || answer_round_now(frozen, step, now - round_->started)) {
      answer_round(frozen, step);
    }
  }
  if (round_->has_target && !round_->done_sent &&
      page.done_seq.load(std::memory_order_acquire) >= static_cast<std::int64_t>(round_->seq)) {
    round_->done_sent = true;
    Message m;
    m.kind = MsgKind::done;
    m.seq = round_->seq;
    m.step = page.done_step.load(std::memory_order_acquire);
    send_up(m);
  }
}

void Supervisor::on_program_exit(int status) {
  program_.reset();
  // What the page says goes to rank 0 before the exit: whether the program uses the client
  // API, and a checkpoint it said was done just before it exited. Rank 0 judges the exit
  // by them (a failure, or the stop of a round that ends the run).
  report_round(Steady::now(), true);
  const std::string how = describe_wait_status(status);
  if (end_code_) {
    log(LogLevel::verbose, "program {}", how);
    return;
  }
  if (status != 0) log(LogLevel::info, "program {}", how);
  if (options_.ckpt_signal == SIGTERM && !got_sigterm_ && WIFSIGNALED(status) &&
      WTERMSIG(status) == SIGTERM) {
    // Slurm's SIGTERM reached the program before dlrun read its own: the job is being
    // stopped, which rank 0 must know before the exit (not a failure).
    got_sigterm_ = true;
    Message want;
    want.kind = MsgKind::want;
    want.flag = true;
    want.text = signal_name(SIGTERM);
    send_up(want);
  }
  Message m;
  m.kind = MsgKind::exit;
  m.code = exit_code_of(status);
  m.text = how;
  send_up(m);
}

void Supervisor::on_program_output(sys::Fd& pipe, LinePrefixer& prefixer) {
  std::string data;
  if (!sys::read_available(pipe.get(), data)) {
    prefixer.finish();
    pipe.reset();
    return;
  }
  prefixer.feed(data);
}

void Supervisor::on_rank0_readable() {
  std::string data;
  if (!sys::read_available(up_->fd.get(), data)) {
    up_.reset();
    if (!end_code_) lost_rank0("its dlrun hung up");
    return;
  }
  try {
    up_->in.append(data);
    while (auto line = up_->in.next_line()) handle(parse_message(*line));
  } catch (const SystemError& e) {
    up_.reset();
    lost_rank0(e.what());
  }
}

void Supervisor::lost_rank0(const std::string& why) {
  log(LogLevel::error, "lost rank 0 ({}): stopping", why);
  // Under the job-level launcher, the launcher decides what comes next. Rank 0 on another
  // node may have gone with its node: when the plugin asks, this rank's exit status has
  // it check whether that is the batch host, which only Slurm can take out of the job.
  const bool elsewhere = job_.lost_leader_exit && boot_.rendezvous.node != job_.node;
  end_program(elsewhere             ? kExitLostLeader
              : job_.under_launcher ? kExitRestartStep
                                    : kExitLost,
              "lost rank 0");
  if (job_.under_launcher) {
    if (rank_ == 1) {
      report_culprit(job_, Culprit{boot_.rendezvous.node, 0, CulpritKind::lost});
      report_lost_node(job_, boot_.rendezvous.node);
    }
    return;
  }
  // Rank 0's dlrun is gone, with its program (PR_SET_PDEATHSIG), and nobody else would
  // requeue the job: rank 1 stands in, with the same decision rank 0 would have made.
  if (rank_ != 1) return;
  RunEnding ending;
  ending.end = RunEnd::failed;
  ending.code = kExitLost;
  ending.why = fmt::format("lost rank 0 ({})", why);
  if (boot_.rendezvous.resume_step >= 0) ending.ckpt_at_start = boot_.rendezvous.resume_step;
  ending.lost_node = boot_.rendezvous.node;
  ending.verdict = judge_run_culprit(job_, Culprit{boot_.rendezvous.node, 0, CulpritKind::lost});
  conclude_run(job_, options_.max_stalled_restarts, ending,
               [this](JobPhase phase, const std::string& detail) {
                 show_status_without_rank0(phase, detail);
               });
}

void Supervisor::show_status_without_rank0(JobPhase phase, const std::string& detail) {
  slurm::show_phase(job_.job, phase, detail);
}

void Supervisor::on_rank_message(std::uint32_t rank, const Message& m) {
  if (watch_ && watch_->on_message(rank, m, Steady::now())) return;
  coordinator_->on_message(rank, m, Steady::now());
}

void Supervisor::tick(Steady::time_point now) {
  // SIGCHLD is the signal to look; this also catches an exit whose signal coalesced.
  if (program_) {
    if (const auto status = program_->reap()) on_program_exit(*status);
  }
  if (program_) report_round(now, false);
  if (end_code_ && program_ && !killed_ && now >= kill_at_) {
    program_->signal(SIGKILL);
    killed_ = true;
  }
  // Once the run ends, a program that takes its time to stop is not hung.
  if (watch_ && !end_code_) {
    const bool in_round = round_ && !round_->done_sent && now - round_->started < job_.grace;
    watch_->tick(channel_ ? &channel_->page() : nullptr,
                 program_ ? std::optional(program_->pid()) : std::nullopt,
                 in_round ? std::optional(round_->seq) : std::nullopt, now);
  }
  if (nvml_ && !end_code_ && now >= next_gpu_sample_) {
    next_gpu_sample_ = now + options_.gpu_interval;
    if (const auto samples = nvml_->sample(); !samples.empty()) {
      Message m;
      m.kind = MsgKind::gpu;
      m.text = format_gpu_samples(samples);
      send_up(m);
    }
  }
  if (coordinator_) coordinator_->tick(now);
}

void Supervisor::loop() {
  for (;;) {
    // Messages between rank 0's two roles, in the order they were sent.
    while (!to_coordinator_.empty() || !to_self_.empty()) {
      if (!to_coordinator_.empty()) {
        const Message m = to_coordinator_.front();
        to_coordinator_.pop_front();
        coordinator_->on_message(0, m, Steady::now());
      } else {
        const Message m = to_self_.front();
        to_self_.pop_front();
        handle(m);
      }
    }
    const auto now = Steady::now();
    if (end_code_ && !program_) {
      // Rank 0 waits for the other ranks to hang up (they have its END), every rank for
      // the last of its program's output; both within bounds.
      bool open = out_pipe_ || err_pipe_;
      if (ranks_) open = open || ranks_->any_open();
      if (!open || now >= hangup_deadline_) return;
    }

    std::vector<pollfd> fds;
    std::vector<std::function<void()>> handlers;
    const auto watch = [&](int fd, std::function<void()> h) {
      fds.push_back(pollfd{fd, POLLIN, 0});
      handlers.push_back(std::move(h));
    };
    watch(signals_.get(), [this] {
      signalfd_siginfo si{};
      while (read(signals_.get(), &si, sizeof si) == sizeof si)
        on_signal(static_cast<int>(si.ssi_signo));
    });
    if (out_pipe_) watch(out_pipe_.get(), [this] { on_program_output(out_pipe_, *out_prefixer_); });
    if (err_pipe_) watch(err_pipe_.get(), [this] { on_program_output(err_pipe_, *err_prefixer_); });
    if (up_) watch(up_->fd.get(), [this] { on_rank0_readable(); });
    if (ranks_) ranks_->watch(watch);

    // Short ticks only while this rank waits on its program in a round.
    auto wake = now + 250ms;
    if (round_ && !round_->answered) wake = now + 2ms;
    if (round_ && round_->has_target && !round_->done_sent) wake = std::min(wake, now + 20ms);
    if (end_code_ && program_ && !killed_) wake = std::min(wake, kill_at_);
    if (coordinator_) wake = std::min(wake, coordinator_->next_wakeup(now));
    const auto timeout = std::max<long long>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count());
    const int n = poll(fds.data(), fds.size(), static_cast<int>(timeout));
    if (n < 0 && errno != EINTR) throw SystemError(fmt::format("poll: {}", std::strerror(errno)));
    for (std::size_t i = 0; n > 0 && i < fds.size(); ++i) {
      if (fds[i].revents != 0) handlers[i]();
    }
    tick(Steady::now());
  }
}

}  // namespace

int supervise(const SupervisorOptions& options, const JobSettings& job, Bootstrap boot,
              Inherited inherited, sys::Fd signals) {
  Supervisor s(options, job, std::move(boot), std::move(inherited), std::move(signals));
  return s.run();
}

}  // namespace dl
