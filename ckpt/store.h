// The checkpoint directory: its committed steps, manifests, the `latest` pointer, and
// removal that never leaves a half-deleted checkpoint visible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/manifest.h"

namespace dl::ckpt {

struct StepDir {
  std::uint64_t step;
  std::string path;
};

// The committed step directories of `dir`, newest first. Throws SystemError if `dir`
// cannot be listed, CorruptError if it is not a directory.
std::vector<StepDir> committed_steps(const std::string& dir);

// Parses step_dir/manifest.json; CorruptError if it is missing or invalid, or if it
// names another step than the directory's name.
Manifest read_manifest(const std::string& step_dir);

// The step directory name DIR/latest holds, if any.
std::optional<std::string> read_latest(const std::string& dir);
void write_latest(const std::string& dir, std::uint64_t step);

// Renames the directory out of sight (fsyncing `dir`), then deletes its files.
void remove_step_dir(const std::string& dir, const std::string& path, std::uint64_t step);

}  // namespace dl::ckpt
