// The checkpoint directory: its committed steps, manifests, the `latest` pointer, and
// removal that never leaves a half-deleted checkpoint visible.
#pragma once

#include <dl/ckpt.h>

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
// The same in the directory held open (paths are under dir.path()).
std::vector<StepDir> committed_steps(const sys::Fd& dir);

// The checkpoint directory `path` held open for the saves of a run, which reach it
// through this descriptor only: swapping the path afterwards changes nothing. Refused
// (SystemError) unless it is this user's and not writable by every user (unless sticky):
// nobody outside the user's group may rename the checkpoints in it.
sys::Fd open_own_dir(const std::string& path);

// The step directory `path` held open, refusing a link at its last component (which is
// followed only when the path ends in '/').
sys::Fd open_step_dir(const std::string& path);
// The step directory `name` inside `dir`, refusing a link.
sys::Fd open_step_dir(const sys::Fd& dir, const std::string& name);

// Parses step_dir/manifest.json; CorruptError if it is missing, not a regular file (a
// link, a FIFO, a device), larger than kMaxManifestBytes or invalid, or if it names
// another step than the directory's name.
Manifest read_manifest(const std::string& step_dir);
Manifest read_manifest(const sys::Fd& step_dir);

// The step directory name DIR/latest holds, if any (nothing for a link or non-file).
std::optional<std::string> read_latest(const std::string& dir);
std::optional<std::string> read_latest(const sys::Fd& dir);
void write_latest(const std::string& dir, std::uint64_t step);
void write_latest(const sys::Fd& dir, std::uint64_t step);

// Renames the step directory `name` of `dir` out of sight under an unpredictable name
// (fsyncing `dir`), then deletes its files without following any link.
void remove_step_dir(const std::string& dir, const std::string& path, std::uint64_t step);
void remove_step_dir(const sys::Fd& dir, const std::string& name, std::uint64_t step);

// list_checkpoints() and prune() in the directory held open (defined with them).
std::vector<CheckpointInfo> list_checkpoints(const sys::Fd& dir, Verify level);
std::vector<std::string> prune(const sys::Fd& dir, const Retention& policy, bool dry_run);

}  // namespace dl::ckpt
