// The hang watchdog's adapter in dlrun (--dl-watchdog; the decision is launcher/watchdog.h).
// Every rank's dlrun reads its program's last step from the page it shares with it and
// sends it to rank 0 (PROGRESS) when it moved, at most once a second. Rank 0 declares the
// hang, asks the stalled ranks' dlruns for their programs' stacks (DUMP: each runs gdb on
// its own child, so ptrace is allowed, bounded in time), writes the evidence to a new file
// in the job's directory, names it in the log, and only then ends the run the way a
// failed program does.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "client/channel.h"
#include "launcher/control.h"
#include "launcher/run_settings.h"
#include "launcher/watchdog.h"

namespace dl {

// The stacks of a process and its threads: native frames (gdb in batch mode) and, for a
// Python interpreter, Python frames (gdb's python extension from python3-dbg). gdb is
// killed after `timeout`: a hung debugger must not hang dlrun. Throws nothing: a failure
// is described in `how`, with what was collected up to then in `text`.
struct Stacks {
  std::string text;
  bool ok = false;
  std::string how;
};
Stacks collect_stacks(pid_t pid, std::chrono::seconds timeout);
// The same for the program and the other processes of its process group (a wrapper
// script's interpreter, worker processes), the program first, at most 4 processes, all
// within `timeout`.
Stacks collect_program_stacks(pid_t program, std::chrono::seconds timeout);

class HangWatch {
 public:
  using Steady = std::chrono::steady_clock;
  struct Hooks {
    std::function<void(const Message&)> send_up;                      // rank != 0: to rank 0
    std::function<void(std::uint32_t, const Message&)> send_to_rank;  // rank 0: to one rank
    // Rank 0: ends the run as a failure of `rank`'s program (EXIT kExitHung `how`).
    std::function<void(std::uint32_t rank, const std::string& how)> fail;
  };
  // `report_dir`: where the evidence goes (the checkpoint directory, else the
  // experiment's); empty: into the log only. `label`: job id and run, for the file name.
  HangWatch(std::chrono::seconds limit, std::uint32_t rank, std::uint32_t world_size,
            std::string report_dir, std::string label, Hooks hooks);

  void set_node(std::uint32_t rank, std::string node);
  // Every tick, on every rank. `program`: its pid while it runs; `round`: the checkpoint
  // round this rank takes part in, until it is done or its grace time is over. While the
  // program waits in that round for the agreed step, or saves at it, it is busy, not
  // stalled; a program that never gets there (hung) is not.
  void tick(const channel::Page* page, std::optional<pid_t> program,
            std::optional<std::uint64_t> round, Steady::time_point now);
  // Rank 0: a message from `rank`; true when it was the watchdog's (the coordinator
  // does not see it). EXIT is looked at, and left to the coordinator.
  bool on_message(std::uint32_t rank, const Message& m, Steady::time_point now);
  // A rank other than 0: rank 0's DUMP.
  void on_dump(std::optional<pid_t> program);

 private:
  void declare(const Hang& hang, std::optional<pid_t> program, Steady::time_point now);
  void add_trace(std::uint32_t rank, const std::string& line);
  void finish();

  std::chrono::seconds limit_;
  std::uint32_t rank_;
  std::string report_dir_;
  std::string label_;
  Hooks hooks_;
  std::vector<std::string> nodes_;

  // Every rank: what it last told rank 0.
  std::int64_t step_ = -1;
  Steady::time_point step_changed_{};
  std::int64_t sent_step_ = -1;
  Steady::time_point next_send_{};

  // Rank 0.
  std::optional<Watchdog> watchdog_;
  enum class Phase { watching, collecting, done } phase_ = Phase::watching;
  std::string verdict_;
  std::uint32_t culprit_ = 0;
  std::map<std::uint32_t, std::string> traces_;  // by rank, while collecting
  std::map<std::uint32_t, std::string> how_;     // by rank: TRACED's
  Steady::time_point collect_by_{};
};

}  // namespace dl
