// dlrun: the launcher of a deep-learning job. In a batch script or salloc (the
// recommended form) it is the job-level launcher that starts (and restarts) srun steps
// of itself; in a step
//   srun --mpi=pmix dlrun [options] [--] program [args...]
// it runs one task. See man/dlrun.1. Exit codes: the program's own; 75 when the run
// stopped after a checkpoint and the job was requeued; 76 when a rank failed in a step
// of the job-level launcher; 2 for a usage error; 1 when dlrun itself failed.
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "core/cli.h"
#include "core/drain.h"
#include "core/error.h"
#include "core/log.h"
#include "core/node_down.h"
#include "core/parse.h"
#include "core/plugstack.h"
#include "core/signals.h"
#include "core/spec.h"
#include "core/sysio.h"
#include "exp/trial.h"
#include "launcher/bootstrap.h"
#include "launcher/job_launcher.h"
#include "launcher/local_launch.h"
#include "launcher/local_ranks.h"
#include "launcher/program.h"
#include "launcher/rank_log.h"
#include "launcher/slurm_job.h"
#include "launcher/supervisor.h"

extern char** environ;

namespace dl {
namespace {

constexpr int kExitUsage = 2;
constexpr int kExitFailure = 1;

// The signals dlrun owns, blocked from the first instruction so that none is lost
// during the bootstrap; the threads PMIx and NCCL start inherit the mask.
constexpr int kOwnedSignals[] = {SIGTERM, SIGINT, SIGUSR1, SIGUSR2, SIGCONT, SIGCHLD};

// Why a signal cannot be the program's checkpoint request; nullptr if it can.
const char* unusable_request_signal(int sig) {
  switch (sig) {
    case SIGUSR1: return "NCCL uses SIGUSR1";
    case SIGINT:
    case SIGUSR2:
    case SIGCONT:
      return "Slurm sends it to every process of the step, so the program would get it twice";
    case SIGKILL:
    case SIGSTOP: return "a program cannot handle it";
    case SIGCHLD: return "it reports the program's own children";
    default: return nullptr;
  }
}

sys::Fd own_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (const int sig : kOwnedSignals) sigaddset(&set, sig);
  if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0) {
    throw SystemError("couldn't block the signals dlrun owns");
  }
  sys::Fd fd(signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!fd) throw SystemError("couldn't create a signalfd");
  return fd;
}

std::string getenv_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// The prefix of dlrun's own lines: "[rank 3@n2] dlrun: ".
struct LogPrefix {
  std::mutex mutex;
  std::string text;
};

LogPrefix& log_prefix() {
  static LogPrefix* p = new LogPrefix;
  return *p;
}

void set_log_prefix_text(std::string text) {
  std::lock_guard<std::mutex> lock(log_prefix().mutex);
  log_prefix().text = std::move(text);
}

void set_log_prefix(std::uint32_t rank, const std::string& node) {
  set_log_prefix_text(rank_prefix(rank, node) + " dlrun: ");
}

void install_log_sink(bool verbose) {
  set_log_sink([verbose](LogLevel level, std::string_view message) {
    if (level > LogLevel::info && !verbose) return;
    std::string line;
    {
      std::lock_guard<std::mutex> lock(log_prefix().mutex);
      line = log_prefix().text;
    }
    if (level == LogLevel::error) line += "error: ";
    if (level == LogLevel::warning) line += "warning: ";
    line.append(message);
    line += '\n';
    // One write per line, so that lines of dlrun and of the program never interleave.
    ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
    (void)ignored;
  });
}

std::string shell_quote(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                              "0123456789_-./=:,@+%") == std::string::npos) {
    return word;
  }
  std::string out = "'";
  for (const char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// How this dlrun was started.
enum class Role {
  rank,      // one task of an srun --mpi=pmix step (or local ranks, see decide_launch)
  launcher,  // in a job (batch script, salloc) outside any step: starts the steps
};

// Under srun with PMIx: a rank; in a job outside any step: the job-level launcher.
// Elsewhere (no job, or a step without PMIx): say what would have worked.
Role role_or_exit(int argc, char** argv) {
  if (std::getenv("PMIX_NAMESPACE") && std::getenv("PMIX_RANK")) return Role::rank;
  const bool under_srun = std::getenv("SLURM_STEP_ID") != nullptr;
  if (!under_srun && std::getenv("SLURM_JOB_ID")) return Role::launcher;
  std::string args;
  for (int i = 1; i < argc; ++i) args += " " + shell_quote(argv[i]);
  std::fprintf(stderr,
               "dlrun: %s\n"
               "dlrun: run it in a job's batch script or in salloc (it starts the ranks with\n"
               "dlrun: srun), or start one dlrun per task with srun and PMIx, e.g.\n"
               "  srun --mpi=pmix dlrun%s\n",
               under_srun ? "this task has no PMIx server (srun ran without --mpi=pmix)"
                          : "not in a Slurm job",
               args.c_str());
  std::exit(kExitUsage);
}

std::optional<std::int64_t> env_number(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return static_cast<std::int64_t>(parse_uint(name, v, 0, INT64_MAX));
}

// Where dlrun runs, for decide_launch().
StepView step_view() {
  StepView v;
  v.in_step = std::getenv("SLURM_STEP_ID") != nullptr;
  if (const auto n = env_number("SLURM_STEP_NUM_TASKS")) {
    v.step_tasks = static_cast<std::uint32_t>(std::min<std::int64_t>(*n, UINT32_MAX));
  }
  v.task_pid = env_number("SLURM_TASK_PID");
  v.self_pid = getpid();
  if (const char* gpus = std::getenv("CUDA_VISIBLE_DEVICES")) v.visible_gpus = gpus;
  return v;
}

// dlrun started by the user's own srun: no job-level launcher, so a failed rank is not
// restarted inside the allocation; and a task count that is not one rank per GPU.
void say_what_srun_gives_up(const JobSettings& job, std::uint32_t ranks,
                            std::optional<std::uint32_t> gpus) {
  bool batch = false;
  try {
    if (job.job) batch = slurm::load_job(*job.job).batch;
  } catch (const std::exception& e) {
    log(LogLevel::verbose, "{}", e.what());
  }
  if (batch) {
    log(LogLevel::info,
        "started by srun: a rank that fails sends the job back through the queue (requeue); "
        "dlrun run directly in the batch script, without srun, restarts it inside the "
        "allocation");
  } else {
    log(LogLevel::info,
        "started by srun outside a batch script: a rank that fails ends the run (only batch "
        "jobs can be requeued); dlrun run directly in a batch script or in salloc, without "
        "srun, restarts it inside the allocation");
  }
  if (gpus && *gpus != ranks) {
    log(LogLevel::info,
        "{} {} for {} GPUs (--dl-gpus={}): for one rank per GPU give srun -n{}, or run "
        "dlrun directly in the batch script",
        ranks, ranks == 1 ? "rank" : "ranks", *gpus, *gpus, *gpus);
  }
}

std::chrono::milliseconds duration_option(const char* option, const std::string& text,
                                          std::chrono::seconds min) {
  return parse_duration(option, text, min, std::chrono::hours(24));
}

int run(int argc, char** argv) {
  Inherited inherited;
  inherited.fds = open_fds();
  sys::Fd signals = own_signals();
  for (char** e = environ; *e; ++e) inherited.env.emplace_back(*e);

  CLI::App app{
      "dlrun: launches the ranks of a deep-learning job, one per GPU, and stays in charge of "
      "them: rank bootstrap, checkpoint on preemption or deadline, restart inside the "
      "allocation, requeue, resume.\n"
      "Run it directly in the batch script (or in salloc): dlrun [options] program [args...]\n"
      "Under srun --mpi=pmix it runs one rank per task, and a rank that fails requeues the "
      "job instead of restarting inside the allocation. See dlrun(1).",
      "dlrun"};
  app.prefix_command();
  add_standard_flags(app, "dlrun");
  // Each option's default, then its environment variable (CLI11: a set, non-empty one),
  // then the command line.
  std::string ckpt_signal = "URG";
  std::string status_interval = "60s";
  std::string status_comment = "on";
  std::string gpu_interval = "10s";
  std::string gpu_idle = "5%:30m";
  std::string gpu_idle_action = "warn";
  std::string deadline_margin = "30s";
  std::string kill_wait = "3s";
  std::string max_stalled = "2";
  std::string resume_verify = "full";
  bool no_prefix = false;
  bool verbose = false;
  std::string check_config;
  app.add_option("--check-config", check_config,
                 "check the spank_dl.so line of plugstack.conf FILE (or of a file it includes) "
                 "with the plugin's own parser, print its settings and OK, and exit (2: Slurm "
                 "would fail to load the plugin)")
      ->type_name("FILE");
  app.add_option("--ckpt-signal", ckpt_signal,
                 "signal sent to the program when a checkpoint step is agreed, or none "
                 "(default URG)")
      ->envname("DL_CKPT_SIGNAL");
  app.add_option("--status-interval", status_interval,
                 "at most one status update of the job comment per DURATION (default 60s)")
      ->envname("DL_STATUS_INTERVAL");
  app.add_option("--status-comment", status_comment,
                 "put the status line in the job comment, which other users can read unless "
                 "the site sets PrivateData=jobs: on (default) or off (only logged)")
      ->envname("DL_STATUS_COMMENT");
  app.add_option("--gpu-interval", gpu_interval,
                 "sample the step's GPUs through NVML every DURATION and show them in the status "
                 "line, or off (default 10s)")
      ->envname("DL_GPU_INTERVAL");
  app.add_option("--gpu-idle", gpu_idle,
                 "flag the job in its status line once every GPU of it has been below UTIL% for "
                 "DURATION: UTIL%:DURATION or off (default 5%:30m)")
      ->envname("DL_GPU_IDLE");
  app.add_option("--gpu-idle-action", gpu_idle_action,
                 "what flagging the GPUs idle does: warn (default), or requeue, which also "
                 "checkpoints and requeues a --dl-preemptible job to free its GPUs")
      ->envname("DL_GPU_IDLE_ACTION");
  app.add_option("--deadline-margin", deadline_margin,
                 "start the deadline checkpoint this long, plus the time a checkpoint takes, "
                 "before the job's end (default 30s)")
      ->envname("DL_DEADLINE_MARGIN");
  app.add_option("--kill-wait", kill_wait,
                 "after SIGTERM, wait this long before SIGKILL when stopping the program "
                 "(default 3s)")
      ->envname("DL_KILL_WAIT");
  app.add_option("--max-stalled-restarts", max_stalled,
                 "hold the job after N restarts in a row without a newer checkpoint (default 2)")
      ->envname("DL_MAX_STALLED_RESTARTS");
  app.add_option("--resume-verify", resume_verify,
                 "how DL_RESUME_FROM is checked: quick, metadata or full (default full)")
      ->envname("DL_RESUME_VERIFY");
  app.add_flag("--no-prefix", no_prefix, "pass the program's output through without [rank N@node]");
  app.add_flag("-v,--verbose", verbose, "also log what dlrun does step by step");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  install_log_sink(verbose);
  if (!check_config.empty()) {
    for (const auto& line : check_plugstack(check_config)) std::printf("%s\n", line.c_str());
    return 0;
  }

  SupervisorOptions options;
  options.command = app.remaining();
  if (!options.command.empty() && options.command.front() == "--") {
    options.command.erase(options.command.begin());
  }
  if (options.command.empty()) {
    std::fprintf(stderr, "dlrun: no program to run\n%s", app.help().c_str());
    return kExitUsage;
  }
  options.ckpt_signal = parse_signal("--ckpt-signal", ckpt_signal);
  if (const char* why = unusable_request_signal(options.ckpt_signal)) {
    throw InputError(
        fmt::format("--ckpt-signal={}: {}; choose another, e.g. URG", ckpt_signal, why));
  }
  options.status_interval =
      duration_option("--status-interval", status_interval, std::chrono::seconds(1));
  slurm::set_status_comments(parse_on_off("--status-comment", status_comment));
  options.gpu_idle = parse_idle_rule("--gpu-idle", gpu_idle);
  if (gpu_idle_action != "warn" && gpu_idle_action != "requeue") {
    throw InputError(
        fmt::format("--gpu-idle-action={}: expected warn or requeue", gpu_idle_action));
  }
  options.requeue_when_idle = gpu_idle_action == "requeue";
  if (gpu_interval != "off") {
    try {
      options.gpu_interval = parse_duration("--gpu-interval", gpu_interval, std::chrono::seconds(1),
                                            std::chrono::hours(1));
    } catch (const InputError&) {
      throw InputError(fmt::format(
          "--gpu-interval={}: expected off or a duration from 1s to 1h, e.g. 10s", gpu_interval));
    }
  }
  options.deadline_margin =
      duration_option("--deadline-margin", deadline_margin, std::chrono::seconds(0));
  options.kill_wait = duration_option("--kill-wait", kill_wait, std::chrono::seconds(0));
  options.max_stalled_restarts =
      static_cast<std::uint32_t>(parse_uint("--max-stalled-restarts", max_stalled, 0, 1000));
  options.prefix_output = !no_prefix;
  options.resume_check = parse_check_level("--resume-verify", resume_verify);

  // At the shell of a one-task step (srun --pty): local ranks; otherwise a rank of a
  // PMIx step, or the job-level launcher outside any step.
  const LaunchDecision launch = decide_launch(step_view());
  const Role role = launch.mode == LaunchMode::local ? Role::rank : role_or_exit(argc, argv);

  JobSettings job;
  job.node = getenv_or("SLURMD_NODENAME", "");
  if (job.node.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    job.node = host;
  }
  if (launch.mode == LaunchMode::local) {
    // The launcher speaks for all its ranks.
    if (launch.ranks > 1) {
      set_log_prefix_text(fmt::format("[ranks 0-{}@{}] dlrun: ", launch.ranks - 1, job.node));
    } else {
      set_log_prefix(0, job.node);
    }
  } else {
    set_log_prefix(static_cast<std::uint32_t>(
                       parse_uint("PMIX_RANK", getenv_or("PMIX_RANK", "0"), 0, UINT32_MAX)),
                   job.node);
  }
  const auto spec = spec_from_env([](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  });
  if (spec) {
    job.ckpt_dir = spec->ckpt_dir;
    job.ckpt_every = spec->ckpt_every;
    job.grace = spec->grace;
    job.max_restarts = spec->max_restarts;
    job.watchdog = spec->watchdog;
    job.preemptible = spec->preemptible;
    job.gpus = spec->gpus.value_or(0);
  }
  job.restart_count = static_cast<std::uint32_t>(
      parse_uint("SLURM_RESTART_COUNT", getenv_or("SLURM_RESTART_COUNT", "0"), 0, UINT32_MAX));
  job.requeue_count = job.restart_count;
  job.job = slurm::job_from_env();
  if (role == Role::launcher) {
    set_log_prefix_text(fmt::format("[job@{}] dlrun: ", job.node));
    LauncherSettings ls;
    ls.dlrun = "/proc/self/exe";
    char self[4096] = {};
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) ls.dlrun.assign(self, static_cast<std::size_t>(n));
    ls.dlrun_args.assign(argv + 1, argv + argc);
    ls.env = inherited.env;
    ls.job = job;
    ls.max_stalled_restarts = options.max_stalled_restarts;
    if (spec && spec->elastic) ls.elastic = RankRange{spec->elastic->min, spec->elastic->max};
    // salloc's shell has the spec only as the SPANK plugin's copy, SLURM_SPANK_DL_*.
    ls.gpus = spec ? spec->gpus : std::nullopt;
    if (!spec) {
      if (const auto gpus = env_number("SLURM_SPANK_DL_GPUS")) {
        ls.gpus = static_cast<std::uint32_t>(std::min<std::int64_t>(*gpus, UINT32_MAX));
      }
    }
    return run_job_launcher(std::move(ls), std::move(signals));
  }
  job.lost_leader_exit = getenv_or("DL_LOST_LEADER_EXIT", "") == std::to_string(kExitLostLeader);
  // Started by the job-level launcher: its restart count, which includes the restarts
  // inside the allocation.
  if (getenv_or("DL_JOB_LAUNCHER", "") == "1") {
    job.under_launcher = true;
    job.comment_frozen = getenv_or("DL_JOB_COMMENT_FROZEN", "") == "1";
    job.launcher_addr = getenv_or("DL_LAUNCHER_ADDR", "");
    job.launcher_port = static_cast<std::uint16_t>(
        parse_uint("DL_LAUNCHER_PORT", getenv_or("DL_LAUNCHER_PORT", "0"), 0, 65535));
    job.launcher_key = getenv_or("DL_LAUNCHER_KEY", "");
    job.mark_culprit = getenv_or("DL_CULPRIT_EXIT", "") == std::to_string(kExitCulpritStep);
    // The program has no use for them.
    inherited.env.erase(
        std::remove_if(inherited.env.begin(), inherited.env.end(),
                       [](const std::string& v) { return v.rfind("DL_LAUNCHER_", 0) == 0; }),
        inherited.env.end());
    job.restart_count = static_cast<std::uint32_t>(
        parse_uint("DL_RESTART_COUNT", getenv_or("DL_RESTART_COUNT", "0"), 0, UINT32_MAX));
  }

  ResumeRequest resume;
  resume.ckpt_dir = job.ckpt_dir;
  resume.check = options.resume_check;
  // slurmstepd says so when it chose the directory (<root>/<user>/<job>): then only this
  // job's own checkpoints are resumed there.
  resume.kind =
      getenv_or("DL_CKPT_DIR_DEFAULT", "") == "1" ? CkptDirKind::site_default : CkptDirKind::chosen;
  if (job.job) resume.own_job = job.job->to_string();
  resume.job = job.job;
  if (spec) resume.resume_from = spec->resume_from;
  Bootstrap boot;
  if (launch.mode == LaunchMode::local) {
    log(LogLevel::verbose, "{}", launch.why);
    // Several ranks on one terminal: their lines are told apart by the prefix.
    options.capture_on_tty = launch.ranks > 1;
    LocalStart local = start_local_ranks(launch.ranks, job.node, resume, inherited, signals,
                                         [&](std::uint32_t r) { set_log_prefix(r, job.node); });
    if (!local.bootstrap) return local.exit_code;  // the launcher: every rank has ended
    boot = std::move(*local.bootstrap);
  } else {
    boot = bootstrap(job.node, resume);
  }
  set_log_prefix(boot.layout.rank, job.node);
  if (boot.layout.rank == 0 && launch.mode != LaunchMode::local && !job.under_launcher) {
    say_what_srun_gives_up(job, boot.layout.world_size, spec ? spec->gpus : std::nullopt);
  }
  if (boot.layout.rank == 0 && boot.resume) {
    const ResumePoint& p = *boot.resume;
    log(LogLevel::info, "{} (restart {})", resume_message({p.path, p.step, p.writer_job, p.writer}),
        job.restart_count);
  }
  if (boot.layout.rank == 0) {
    exp::RunStart start{boot.rendezvous.resume_from, std::nullopt};
    if (boot.resume) {
      start.resume_step = boot.resume->step;
    } else if (!job.ckpt_dir.empty()) {
      start.resume_step = -1;  // dlrun keeps the checkpoints and there is none: step 0
    }
    for (auto& var : exp::start_trial(job.restart_count, start)) {
      inherited.env.push_back(std::move(var));
    }
  }
  return supervise(options, job, std::move(boot), std::move(inherited), std::move(signals));
}

}  // namespace
}  // namespace dl

int main(int argc, char** argv) {
  try {
    return dl::run(argc, argv);
  } catch (const dl::InputError& e) {
    std::fprintf(stderr, "dlrun: %s\n", e.what());
    return dl::kExitUsage;
  } catch (const std::exception& e) {
    dl::log(dl::LogLevel::error, "{}", e.what());
    return dl::kExitFailure;
  }
}
