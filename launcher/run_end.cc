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

void report_lost_node(const JobSettings& job, const std::string& node) {
  if (job.launcher_addr.empty() || node.empty()) return;
  try {
    const sys::Fd fd =
        net::connect_tcp(job.launcher_addr, job.launcher_port, std::chrono::seconds(2));
    net::send_all(fd.get(), format_lost_node(job.launcher_key, node));
    log(LogLevel::verbose, "told the launcher that node {} is lost", node);
  } catch (const std::exception& e) {
    log(LogLevel::warning, "couldn't tell the launcher that node {} is lost: {}", node, e.what());
  }
}

void report_culprit(const JobSettings& job, const Culprit& culprit) {
  if (job.launcher_addr.empty() || culprit.node.empty()) return;
  try {
    const sys::Fd fd =
        net::connect_tcp(job.launcher_addr, job.launcher_port, std::chrono::seconds(2));
    net::send_all(fd.get(), format_culprit(job.launcher_key, culprit));
    log(LogLevel::verbose, "told the launcher the culprit: {}", describe_culprit(culprit));
  } catch (const std::exception& e) {
    log(LogLevel::warning, "couldn't tell the launcher the culprit ({}): {}",
        describe_culprit(culprit), e.what());
  }
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

RunOutcome conclude_run(const JobSettings& job, std::uint32_t max_stalled_restarts, RunEnd end,
                        int code, const std::string& why, std::optional<std::int64_t> ckpt_at_start,
                        const ShowStatus& show, const std::string& lost_node, bool in_allocation,
                        const std::optional<CulpritVerdict>& verdict) {
  RunOutcome out;
  out.exit_code = code;
  const std::string history_file =
      job.ckpt_dir.empty() || !job.job ? "" : history_path(job.ckpt_dir, job.job->to_string());
  // Without a place to keep it, every earlier run counts as a failure without progress.
  RestartHistory history{job.restart_count, job.restart_count, std::nullopt};
  if (!history_file.empty()) {
    warn_on_error([&] { history = read_history(history_file); }, "starting a new restart history");
    warn_on_error([&] {
      // Whether the run left a newer checkpoint a restart can resume from: one with
      // corrupt data is no progress, so every checksum is checked (newest first, stopping
      // at the first that passes: usually one read of what this run just wrote).
      if (const auto r = newest_checkpoint(job.ckpt_dir, kProgressCheck)) {
        out.newest_ckpt = r->step;
      }
    });
  }
  const RestartPolicy policy{job.max_restarts, max_stalled_restarts};
  RestartDecision d = decide_restart(policy, history, end, ckpt_at_start, out.newest_ckpt);
  // A node that caused the job's last failures: in the log, and after the reason in the status.
  std::string excluded;
  std::string culprit_note;
  if (verdict && end == RunEnd::failed) {
    d.history.culprits = verdict->recent;
    if (verdict->exclude) {
      excluded = *verdict->exclude;
      culprit_note = "; " + verdict->why;
      log(LogLevel::error, "{}", verdict->why);
    }
  }
  bool shown = false;
  const auto forget_history = [&] {
    if (!history_file.empty()) warn_on_error([&] { remove_history(history_file); });
  };
  switch (d.action) {
    case RestartAction::finish:
      forget_history();
      out.phase = JobPhase::completed;
      break;
    case RestartAction::requeue:
      if (in_allocation && end == RunEnd::failed) {
        if (!history_file.empty()) {
          warn_on_error([&] { write_history(history_file, d.history); },
                        "the restart guard will not see this run");
        }
        out.phase = JobPhase::restarting;
        out.detail = fmt::format("{}; {}{}", why, d.reason, culprit_note);
        out.restart_here = true;
        out.exit_code = kExitRestartStep;
        break;
      }
      [[fallthrough]];
    case RestartAction::hold: {
      const bool hold = d.action == RestartAction::hold;
      const std::string blocker = requeue_blocker(job);
      const JobPhase not_requeued = end == RunEnd::failed ? JobPhase::failed : JobPhase::stopped;
      if (end == RunEnd::stopped) out.exit_code = blocker.empty() ? kExitRequeued : kExitStopped;
      if (!blocker.empty()) {
        log(LogLevel::info, "{}: not requeued: {}", why, blocker);
        out.phase = not_requeued;
        out.detail = fmt::format("{}; not requeued: {}", why, blocker);
        break;
      }
      if (!history_file.empty()) {
        warn_on_error([&] { write_history(history_file, d.history); },
                      "the restart guard will not see this run");
      }
      out.phase = hold ? JobPhase::held : JobPhase::requeued;
      out.detail = fmt::format("{}; {}{}", why, d.reason, culprit_note);
      // The status line says why before the job is back in the queue.
      show(out.phase, out.detail);
      shown = true;
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
          break;
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
      if (!excluded.empty() && excluded != exclude) {
        exclude = exclude.empty() ? excluded : fmt::format("{},{}", exclude, excluded);
      }
      if (end == RunEnd::stopped && !hold && exclude.empty() &&
          slurm::slurm_requeues_job_ending_in_grace()) {
        slurm::JobInfo info;
        warn_on_error([&] { info = slurm::load_job(*job.job); }, "requeuing it itself");
        if (info.preempted_at) {
          // Its own requeue would make Slurm requeue the next run once more at its end.
          log(LogLevel::info, "job {} is preempted: Slurm requeues it as this run ends; {}",
              job.job->to_string(), d.reason);
          break;
        }
      }
      try {
        // After a node failure the job is requeued held, excludes the node and is
        // released in one update: it is never eligible while the node could still take it
        // (slurmctld does not know the node has failed before SlurmdTimeout).
        slurm::requeue(*job.job, hold || !exclude.empty());
        if (!exclude.empty()) {
          try {
            slurm::exclude_failed_node(*job.job, exclude, !hold);
          } catch (const std::exception& e) {
            log(LogLevel::error, "{}: job {} stays held (release it with scontrol release {})",
                e.what(), job.job->to_string(), job.job->to_string());
          }
        }
        log(LogLevel::info, "{} job {}: {}", hold ? "held" : "requeued", job.job->to_string(),
            d.reason);
      } catch (const std::exception& e) {
        log(LogLevel::error, "{}", e.what());
        out.phase = not_requeued;
        out.detail = fmt::format("{}; {}", why, e.what());
        if (end == RunEnd::stopped) out.exit_code = kExitStopped;
        shown = false;
      }
      break;
    }
  }
  if (!shown) show(out.phase, out.detail);
  return out;
}

}  // namespace dl
