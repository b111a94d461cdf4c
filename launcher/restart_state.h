// The restart history of one job (array task) between its runs: a small file next to
// its checkpoints, written by rank 0 before it requeues the job.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "launcher/restart.h"

namespace dl {

// <ckpt_dir>/.dlrun-<job id>.restarts
std::string history_path(const std::string& ckpt_dir, const std::string& job_id);

// A missing file is an empty history; an unreadable one throws dl::SystemError.
RestartHistory read_history(const std::string& path);

// Durably: a temporary file, fsync, rename, fsync of the directory.
void write_history(const std::string& path, const RestartHistory& history);

void remove_history(const std::string& path);

// The newest checkpoint step the job's own records know of: its restart history (a file
// in the checkpoint directory) and the status line in its job comment ("ckpt 1200",
// kept by slurmctld, so it outlives a checkpoint root that differs between nodes).
// nullopt when neither says.
std::optional<std::int64_t> recorded_checkpoint(const RestartHistory& history,
                                                std::string_view job_comment);

}  // namespace dl
