// dlrun's JobControl (launcher/job_control.h): libslurm, the end of a run as
// launcher/run_end.h carries it out, tracking through exp/trial.h, dl-stats' records, the
// program's channel page and the system clock.
#pragma once

#include <cstdint>
#include <string>

#include "launcher/channel_file.h"
#include "launcher/job_control.h"
#include "launcher/run_settings.h"

namespace dl {

class DlrunJobControl final : public JobControl {
 public:
  DlrunJobControl(const JobSettings& job, std::uint32_t max_stalled_restarts,
                  const ChannelFile& own_channel);

  WallClock::time_point wall_now() override;
  ProgramProgress progress() override;
  slurm::JobInfo load_job(const slurm::JobRef& job) override;
  bool set_comment(const slurm::JobRef& job, const std::string& comment) override;
  bool status_comments() override;
  RunOutcome conclude_run(const RunEnding& ending, const ShowStatus& show) override;
  CulpritVerdict judge_culprit(const std::optional<Culprit>& culprit) override;
  void report_culprit(const Culprit& culprit) override;
  void report_lost_node(const std::string& node) override;
  void report_run_end(int code) override;
  void record_event(const std::string& kind, const std::string& reason) override;
  void record_checkpoint(std::int64_t step) override;
  void record_metrics(std::int64_t step,
                      const std::vector<std::pair<std::string, double>>& values) override;
  void record_logs(const std::vector<std::string>& paths) override;
  void save_run_record(const RunRecord& record) override;

 private:
  const JobSettings& job_;
  std::uint32_t max_stalled_restarts_;
  const ChannelFile& own_;
  // Where the run's records go (stats_root); empty: nowhere, after a failure.
  std::string stats_root_;
};

}  // namespace dl
