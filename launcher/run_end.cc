#include "launcher/run_end.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "core/log.h"
#include "core/net.h"
#include "core/sysio.h"
#include "launcher/recovery.h"
#include "launcher/restart_state.h"
#include "launcher/resume.h"
#include "launcher/run_end_plan.h"
#include "launcher/slurm_job.h"

namespace dl {
namespace {

template <typename F>
void warn_on_error(F&& f, const char* consequence = nullptr) {
  try {
    f();
  } catch (const std::exception& e) {
    if (consequence) {
      log(LogLevel::warning, "{} ({})", e.what(), consequence);
    } else {
      log(LogLevel::warning, "{}", e.what());
    }
  }
}

// Why the job cannot be requeued, or empty.
std::string requeue_blocker(const JobSettings& job) {
  if (!job.job) return "not in a Slurm job";
  try {
    const slurm::JobInfo info = slurm::load_job(*job.job);
    if (info.cancelled) return "the job was cancelled";
    if (!info.batch) return "only batch jobs can be requeued (submit with sbatch)";
  } catch (const std::exception& e) {
    log(LogLevel::warning, "{}", e.what());
  }
  return "";
}

}  // namespace

namespace {

// One report line to the job-level launcher (JobSettings::launcher_*); `what` says what it
// tells, for the log. A failure is logged: the launcher then goes without it.
void tell_launcher(const JobSettings& job, const std::string& line, const std::string& what) {
  try {
    const sys::Fd fd =
        net::connect_tcp(job.launcher_addr, job.launcher_port, std::chrono::seconds(2));
    net::send_all(fd.get(), line);
    log(LogLevel::verbose, "told the launcher {}", what);
  } catch (const std::exception& e) {
    log(LogLevel::warning, "couldn't tell the launcher {}: {}", what, e.what());
  }
}

}  // namespace

void report_lost_node(const JobSettings& job, const std::string& node) {
  if (job.launcher_addr.empty() || node.empty()) return;
  tell_launcher(job, format_lost_node(job.launcher_key, node),
                fmt::format("that node {} is lost", node));
}

void report_culprit(const JobSettings& job, const Culprit& culprit) {
  if (job.launcher_addr.empty() || culprit.node.empty()) return;
  tell_launcher(job, format_culprit(job.launcher_key, culprit),
                fmt::format("the culprit ({})", describe_culprit(culprit)));
}

void report_run_end(const JobSettings& job, int code) {
  if (job.launcher_addr.empty()) return;
  tell_launcher(job, format_run_end(job.launcher_key, code),
                fmt::format("that the run ended with exit code {}", code));
}

CulpritVerdict judge_run_culprit(const JobSettings& job, const std::optional<Culprit>& culprit,
                                 const std::vector<Culprit>& remembered) {
  std::vector<Culprit> recent = remembered;
  if (!job.ckpt_dir.empty() && job.job) {
    warn_on_error(
        [&] { recent = read_history(history_path(job.ckpt_dir, job.job->to_string())).culprits; },
        "no earlier culprits");
  }
  return judge_culprit(recent, culprit);
}

bool node_answers(const std::string& node) {
  const slurm::NodeInfo info = slurm::load_node(node);
  if (info.not_responding) return false;
  std::string why;
  if (net::tcp_answers(info.address, info.port, std::chrono::seconds(3), why)) return true;
  log(LogLevel::verbose, "node {}: {}", node, why);
  return false;
}

RunOutcome conclude_run(const JobSettings& job, std::uint32_t max_stalled_restarts,
                        const RunEnding& ending, const ShowStatus& show) {
  const std::string history_file =
      job.ckpt_dir.empty() || !job.job ? "" : history_path(job.ckpt_dir, job.job->to_string());
  RunEndFacts f;
  f.end = ending.end;
  f.code = ending.code;
  f.why = ending.why;
  f.ckpt_at_start = ending.ckpt_at_start;
  f.policy = RestartPolicy{job.max_restarts, max_stalled_restarts};
  // Without a place to keep it, every earlier run counts as a failure without progress.
  f.history = RestartHistory{job.restart_count, job.restart_count, std::nullopt};
  if (!history_file.empty()) {
    warn_on_error([&] { f.history = read_history(history_file); },
                  "starting a new restart history");
    warn_on_error([&] {
      // Whether the run left a newer checkpoint a restart can resume from: one with
      // corrupt data is no progress, so every checksum is checked (newest first, stopping
      // at the first that passes: usually one read of what this run just wrote).
      if (const auto r = newest_checkpoint(job.ckpt_dir, kProgressCheck)) {
        f.newest_ckpt = r->step;
      }
    });
  }
  f.verdict = ending.verdict;
  f.in_allocation = ending.in_allocation;
  if (ending.end != RunEnd::completed) f.requeue_blocker = requeue_blocker(job);
  const RunEndPlan plan = plan_run_end(f);
  RunOutcome out = plan.outcome;
  if (!plan.exclude.empty()) log(LogLevel::error, "{}", f.verdict->why);
  if (!history_file.empty()) {
    if (plan.history_action == HistoryAction::remove) {
      warn_on_error([&] { remove_history(history_file); });
    } else if (plan.history_action == HistoryAction::write) {
      warn_on_error([&] { write_history(history_file, plan.history); },
                    "the restart guard will not see this run");
    }
  }
  if (!plan.not_requeued.empty()) {
    log(LogLevel::info, "{}: not requeued: {}", ending.why, plan.not_requeued);
  }
  // The status line says why before the job is back in the queue.
  show(out.phase, out.detail);
  if (!plan.requeue) return out;
  const std::string& lost_node = ending.lost_node;
  bool node_failed = false;
  if (!lost_node.empty()) {
    warn_on_error([&] { node_failed = !node_answers(lost_node); }, "taking it for alive");
  }
  if (node_failed) {
    log(LogLevel::info, "node {} does not answer either: it has failed", lost_node);
    slurm::JobInfo info;
    warn_on_error([&] { info = slurm::load_job(*job.job); });
    if (info.batch_host == lost_node) {
      log(LogLevel::info, "it ran the batch script: Slurm requeues job {} when it notices",
          job.job->to_string());
      return out;
    }
    // The job-level launcher may have taken it out already (a second update of a
    // resized job waits 5 s in slurmctld and fails without slurmdbd).
    bool in_job = true;
    warn_on_error([&] {
      const auto nodes = slurm::expand_nodes(info.nodes);
      in_job = std::find(nodes.begin(), nodes.end(), lost_node) != nodes.end();
    });
    if (in_job) {
      warn_on_error([&] { slurm::remove_node(*job.job, info.nodes, lost_node); },
                    "the job stays completing on it until Slurm marks it DOWN");
    }
  }
  // The nodes the next run must not land on: a failed one, and one that caused the
  // job's last failures.
  std::string exclude = node_failed ? lost_node : std::string();
  if (!plan.exclude.empty() && plan.exclude != exclude) {
    exclude = exclude.empty() ? plan.exclude : fmt::format("{},{}", exclude, plan.exclude);
  }
  if (ending.end == RunEnd::stopped && !plan.hold && exclude.empty() &&
      slurm::slurm_requeues_job_ending_in_grace()) {
    slurm::JobInfo info;
    warn_on_error([&] { info = slurm::load_job(*job.job); }, "requeuing it itself");
    if (info.preempted_at) {
      // Its own requeue would make Slurm requeue the next run once more at its end.
      log(LogLevel::info, "job {} is preempted: Slurm requeues it as this run ends; {}",
          job.job->to_string(), plan.reason);
      return out;
    }
  }
  try {
    // After a node failure the job is requeued held, excludes the node and is
    // released in one update: it is never eligible while the node could still take it
    // (slurmctld does not know the node has failed before SlurmdTimeout).
    slurm::requeue(*job.job, plan.hold || !exclude.empty());
    if (!exclude.empty()) {
      try {
        slurm::exclude_failed_node(*job.job, exclude, !plan.hold);
      } catch (const std::exception& e) {
        log(LogLevel::error, "{}: job {} stays held (release it with scontrol release {})",
            e.what(), job.job->to_string(), job.job->to_string());
      }
    }
    log(LogLevel::info, "{} job {}: {}", plan.hold ? "held" : "requeued", job.job->to_string(),
        plan.reason);
  } catch (const std::exception& e) {
    log(LogLevel::error, "{}", e.what());
    out.phase = ending.end == RunEnd::failed ? JobPhase::failed : JobPhase::stopped;
    out.detail = fmt::format("{}; {}", ending.why, e.what());
    if (ending.end == RunEnd::stopped) out.exit_code = kExitStopped;
    show(out.phase, out.detail);
  }
  return out;
}

}  // namespace dl
