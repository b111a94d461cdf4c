// Rank 0's role: it runs the checkpoint rounds (launcher/agreement.h), turns signals,
// deadlines and failures into one decision for the whole job, talks to Slurm (status
// line, requeue, hold) through a JobControl (launcher/job_control.h) and tells every
// rank how to end. Time comes in as arguments: the unit tests drive it with a fake clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/deadline.h"
#include "launcher/agreement.h"
#include "launcher/control.h"
#include "launcher/gpu_usage.h"
#include "launcher/job_control.h"
#include "launcher/job_info.h"
#include "launcher/restart.h"
#include "launcher/run_settings.h"
#include "launcher/run_stats.h"
#include "launcher/status.h"

namespace dl {

class Coordinator {
 public:
  using Steady = std::chrono::steady_clock;
  // Sends a message to every rank, rank 0 included.
  using Broadcast = std::function<void(const Message&)>;

  // The checkpoint this run resumed from.
  struct Resumed {
    std::int64_t step;
    WallClock::time_point written;
  };

  Coordinator(const SupervisorOptions& options, const JobSettings& job, std::uint32_t world_size,
              std::optional<Resumed> resume, JobControl& control, Broadcast broadcast);

  // After the program started: reads the job (end time, comment) and the restart history.
  void start(Steady::time_point now);
  // Where `rank` runs (from its HELLO): names the node of a failed run's culprit.
  void set_node(std::uint32_t rank, const std::string& node);
  // Sends a message to one rank (rank 0 included): the culprit's end (mark_culprit).
  void set_send_to(std::function<void(std::uint32_t, const Message&)> send_to) {
    send_to_ = std::move(send_to);
  }

  void on_message(std::uint32_t rank, const Message& m, Steady::time_point now);
  // A rank's dlrun went away without saying how its program ended; `node` is where it ran.
  void on_rank_lost(std::uint32_t rank, const std::string& node, const std::string& why,
                    Steady::time_point now);
  // SIGCONT: the job was resumed after a suspension, so its end time moved.
  void on_resumed();
  void tick(Steady::time_point now);
  // The latest time tick() must run again.
  Steady::time_point next_wakeup(Steady::time_point now) const;

 private:
  void want(bool stop, const std::string& why, Steady::time_point now);
  void round_reports_complete(Steady::time_point now);
  void check_round(Steady::time_point now);
  void end_run(RunEnd end, int code, const std::string& why, Steady::time_point now);
  // A rank's program failed: the run ends at once or after kFailureWindow (see failure_).
  void hold_failure(std::uint32_t rank, int code, const std::string& why, Steady::time_point now);
  void end_failed(Steady::time_point now);
  void refresh_job();
  void update_status(Steady::time_point now, bool urgent);
  // Flags the job's GPUs idle or busy again as the idle rule says, and with
  // --gpu-idle-action=requeue stops a preemptible job whose GPUs sit idle.
  void check_idle(Steady::time_point now);
  void set_phase(JobPhase phase, std::string detail, Steady::time_point now);
  // Writes this run's record for dl-stats (launcher/run_stats.h).
  void save_run_record();
  // The GPUs' utilization and memory now, as metrics of the current step of the trial
  // (with --dl-experiment), at each status update.
  void record_gpu_metrics(Steady::time_point now);

  SupervisorOptions options_;
  JobSettings job_;
  std::uint32_t world_size_;
  JobControl& control_;
  Broadcast broadcast_;
  std::function<void(std::uint32_t, const Message&)> send_to_;

  std::vector<bool> exited_;
  std::optional<CheckpointRound> round_;
  std::string round_why_;
  Steady::time_point round_deadline_;
  Steady::time_point round_started_;
  // When this run started: its periodic rounds fall on run_started_ + k x --dl-ckpt-every.
  Steady::time_point run_started_;
  Steady::time_point target_sent_at_;
  bool target_sent_ = false;
  std::uint64_t next_seq_ = 1;
  bool ending_ = false;
  std::string lost_node_;           // the node of the rank whose loss ended the run
  std::vector<std::string> nodes_;  // by rank
  std::optional<Culprit> culprit_;  // what ended a failed run
  // A rank whose program exited non-zero, held for up to kFailureWindow before it ends the
  // run: its collective may have failed because another rank's program was killed, whose
  // exit can reach rank 0 later. A program killed by a signal (or hung) ends the run at
  // once and takes the blame, so that the culprit's node is the right one (judge_culprit).
  struct Failure {
    std::uint32_t rank = 0;
    int code = 0;
    std::string why;
    Steady::time_point until;
  };
  std::optional<Failure> failure_;

  SaveTimeEstimate save_time_;
  std::optional<Steady::time_point> next_periodic_;
  bool deadline_fired_ = false;

  std::optional<slurm::JobInfo> job_info_;
  Steady::time_point next_job_refresh_;
  std::string comment_prefix_;
  RateLimiter limiter_;
  JobPhase phase_ = JobPhase::running;
  std::string phase_detail_;
  Steady::time_point next_status_;

  std::optional<std::int64_t> ckpt_at_start_;
  std::optional<std::int64_t> ckpt_step_;
  GpuUsage gpu_;  // the nodes' GPU samples
  bool idle_flagged_ = false;
  bool idle_requeued_ = false;  // --gpu-idle-action=requeue has asked for the stop
  WallClock::time_point ckpt_time_;
  RunRecord run_;  // this run, for dl-stats
};

}  // namespace dl
