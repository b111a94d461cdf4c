#include "launcher/dlrun_job_control.h"

#include <atomic>
#include <cstdlib>

#include "ckpt/names.h"
#include "core/error.h"
#include "core/log.h"
#include "exp/trial.h"
#include "launcher/run_end.h"
#include "launcher/slurm_job.h"

namespace dl {

DlrunJobControl::DlrunJobControl(const JobSettings& job, std::uint32_t max_stalled_restarts,
                                 const ChannelFile& own_channel)
    : job_(job), max_stalled_restarts_(max_stalled_restarts), own_(own_channel) {
  if (!job_.job) return;
  try {
    stats_root_ = stats_root(std::getenv("DL_STATS_DIR"), std::getenv("HOME"));
  } catch (const InputError& e) {
    log(LogLevel::warning, "no record for dl-stats: {}", e.what());
  }
}

WallClock::time_point DlrunJobControl::wall_now() { return WallClock::now(); }

ProgramProgress DlrunJobControl::progress() {
  ProgramProgress p;
  p.step = own_.page().step.load(std::memory_order_acquire);
  p.done_step = own_.page().done_step.load(std::memory_order_acquire);
  if (const auto m = own_.read_metrics()) p.metrics.emplace(m->step, m->text);
  return p;
}

slurm::JobInfo DlrunJobControl::load_job(const slurm::JobRef& job) { return slurm::load_job(job); }

bool DlrunJobControl::set_comment(const slurm::JobRef& job, const std::string& comment) {
  return slurm::set_comment(job, comment);
}

bool DlrunJobControl::status_comments() { return slurm::status_comments(); }

RunOutcome DlrunJobControl::conclude_run(const RunEnding& ending, const ShowStatus& show) {
  return dl::conclude_run(job_, max_stalled_restarts_, ending, show);
}

CulpritVerdict DlrunJobControl::judge_culprit(const std::optional<Culprit>& culprit) {
  return judge_run_culprit(job_, culprit);
}

void DlrunJobControl::report_culprit(const Culprit& culprit) { dl::report_culprit(job_, culprit); }

void DlrunJobControl::report_lost_node(const std::string& node) {
  dl::report_lost_node(job_, node);
}

void DlrunJobControl::report_run_end(int code) { dl::report_run_end(job_, code); }

void DlrunJobControl::record_event(const std::string& kind, const std::string& reason) {
  exp::record_event(kind, reason);
}

void DlrunJobControl::record_checkpoint(std::int64_t step) {
  exp::record_checkpoint(step, job_.ckpt_dir, ckpt::step_dir_name(step));
}

void DlrunJobControl::record_metrics(std::int64_t step,
                                     const std::vector<std::pair<std::string, double>>& values) {
  exp::record_metrics(step, values);
}

void DlrunJobControl::record_logs(const std::vector<std::string>& paths) {
  exp::record_logs(paths);
}

void DlrunJobControl::save_run_record(const RunRecord& record) {
  if (stats_root_.empty()) return;
  try {
    dl::save_run_record(stats_root_, record);
  } catch (const std::exception& e) {
    log(LogLevel::warning, "no record for dl-stats: {}", e.what());
    stats_root_.clear();
  }
}

}  // namespace dl
