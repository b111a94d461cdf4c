// The restart history of one job (array task) between its runs: a small file next to
// its checkpoints, written by rank 0 before it requeues the job.
#pragma once

#include <string>

#include "launcher/restart.h"

namespace dl {

// <ckpt_dir>/.dlrun-<job id>.restarts
std::string history_path(const std::string& ckpt_dir, const std::string& job_id);

// A missing file is an empty history; an unreadable one throws dl::SystemError.
RestartHistory read_history(const std::string& path);

// Durably: a temporary file, fsync, rename, fsync of the directory.
void write_history(const std::string& path, const RestartHistory& history);

void remove_history(const std::string& path);

}  // namespace dl
