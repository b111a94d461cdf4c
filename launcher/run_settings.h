// What one run of dlrun is given: its options, what the environment says about the job,
// and its exit codes besides the program's own.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "launcher/gpu_usage.h"
#include "launcher/job_info.h"

namespace dl {

// How much of a checkpoint is checked (dl::ckpt::Verify): quick reads the manifest and
// sizes; metadata also each shard's HDF5 metadata; full every dataset's checksum.
enum class CheckLevel { quick = 0, metadata = 1, full = 2 };

// What the restart guard asks of a checkpoint before it counts as progress: every
// checksum, so that a checkpoint with corrupt data never resets the stalled-run count.
inline constexpr CheckLevel kProgressCheck = CheckLevel::full;

struct SupervisorOptions {
  std::vector<std::string> command;
  int ckpt_signal = 0;  // the program's "checkpoint now" request; 0: none
  std::chrono::milliseconds status_interval{60'000};
  // How often each node's first rank samples the step's GPUs there; 0: never.
  std::chrono::milliseconds gpu_interval{0};
  // When rank 0 flags the job's GPUs idle (--gpu-idle); nullopt: never.
  std::optional<IdleRule> gpu_idle;
  // And then, for a preemptible job, checkpoints and requeues it (--gpu-idle-action).
  bool requeue_when_idle = false;
  std::chrono::milliseconds deadline_margin{30'000};
  std::chrono::milliseconds kill_wait{3'000};
  std::uint32_t max_stalled_restarts = 2;
  bool prefix_output = true;
  // Prefix the program's output on a terminal too (several local ranks share one).
  bool capture_on_tty = false;
  CheckLevel resume_check = CheckLevel::full;
};

// What the environment says about the job (the DL_* spec and Slurm's variables).
struct JobSettings {
  std::string ckpt_dir;  // empty: no checkpoints
  std::optional<std::chrono::seconds> ckpt_every;
  std::chrono::seconds grace{120};
  std::uint32_t max_restarts = 3;
  std::uint32_t restart_count = 0;   // runs before this one (DL_RESTART_COUNT)
  std::uint32_t requeue_count = 0;   // requeues before this allocation (SLURM_RESTART_COUNT)
  std::uint32_t gpus = 0;            // --dl-gpus; 0: not given
  std::chrono::seconds watchdog{0};  // --dl-watchdog; 0: off
  bool preemptible = false;          // --dl-preemptible
  std::string node;                  // SLURMD_NODENAME
  std::optional<slurm::JobRef> job;
  // Started by dlrun's job-level launcher (DL_JOB_LAUNCHER=1): a failure ends the step
  // with kExitRestartStep and the launcher restarts it inside the allocation.
  bool under_launcher = false;
  // The launcher resized the job and Slurm accepts no update of it any more (no
  // slurmdbd: see slurm::resized_jobs_frozen): the status line is only logged.
  bool comment_frozen = false;
  // Where the launcher hears of a lost node (DL_LAUNCHER_ADDR, _PORT, _KEY).
  std::string launcher_addr;
  std::uint16_t launcher_port = 0;
  std::string launcher_key;
  // spank_dl.so drains a node that caused two failed steps in a row (DL_CULPRIT_EXIT,
  // see core/drain.h): the culprit rank's dlrun then ends with kExitCulpritStep.
  bool mark_culprit = false;
  // spank_dl.so marks a failed batch host DOWN (DL_LOST_LEADER_EXIT, see
  // core/node_down.h): a rank that lost rank 0 on another node then ends with
  // kExitLostLeader.
  bool lost_leader_exit = false;
};

// Exit codes of dlrun besides the program's own.
inline constexpr int kExitRequeued = 75;  // stopped after a checkpoint; requeued (EX_TEMPFAIL)
inline constexpr int kExitStopped = 143;  // stopped, but not requeued (128 + SIGTERM)
inline constexpr int kExitLost = 1;       // lost contact with rank 0
inline constexpr int kExitHung = 124;     // the watchdog declared the run hung (timeout(1)'s)

}  // namespace dl
