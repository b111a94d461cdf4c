// The checkpoint directory: its committed steps, manifests, the `latest` pointer, and
// removal that never leaves a half-deleted checkpoint visible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/manifest.h"
#include "core/sysio.h"

namespace dl::ckpt {

struct StepDir {
  std::uint64_t step;
  std::string path;
};

// The largest manifest read: enough for 10^6 tensor parts; a bigger file is not ours.
inline constexpr std::size_t kMaxManifestBytes = std::size_t{1} << 30;

// The committed step directories of `dir`, newest first (real directories only: a link
// named like a step is not one). Throws SystemError if `dir` cannot be listed,
// CorruptError if it is not a directory.
std::vector<StepDir> committed_steps(const std::string& dir);

// The step directory `path` held open, refusing a link at its last component (which is
// followed only when the path ends in '/').
sys::Fd open_step_dir(const std::string& path);

// Parses step_dir/manifest.json; CorruptError if it is missing, not a regular file (a
// link, a FIFO, a device), larger than kMaxManifestBytes or invalid, or if it names
// another step than the directory's name.
Manifest read_manifest(const std::string& step_dir);
Manifest read_manifest(const sys::Fd& step_dir);

// The step directory name DIR/latest holds, if any (nothing for a link or non-file).
std::optional<std::string> read_latest(const std::string& dir);
void write_latest(const std::string& dir, std::uint64_t step);
void write_latest(const sys::Fd& dir, std::uint64_t step);

// Renames the step directory `name` of `dir` out of sight under an unpredictable name
// (fsyncing `dir`), then deletes its files without following any link.
void remove_step_dir(const std::string& dir, const std::string& path, std::uint64_t step);
void remove_step_dir(const sys::Fd& dir, const std::string& name, std::uint64_t step);

}  // namespace dl::ckpt
