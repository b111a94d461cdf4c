// Names inside a checkpoint directory, and the rules for names users choose (tensors,
// RNG streams, run ids). Everything here is pure string work.
//
//   DIR/latest                           "step-000001200\n": the newest committed step
//   DIR/step-000001200/manifest.json     the index, written last: its presence commits
//   DIR/step-000001200/shard-00000-of-00004.h5
//   DIR/.tmp-step-000001300.<run id>/    a save in progress (invisible to readers)
//   DIR/.del-step-000000800.<random>/    a checkpoint being removed
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dl::ckpt {

inline constexpr char kManifestName[] = "manifest.json";
inline constexpr char kLatestName[] = "latest";
inline constexpr unsigned kMaxWorldSize = 65536;

// "step-000001200": nine digits at least, so that `ls` sorts the usual steps by number.
std::string step_dir_name(std::uint64_t step);

// The step of a directory name in exactly the form step_dir_name() produces
// ("step-1" and "step-0000000001" are not checkpoints).
std::optional<std::uint64_t> parse_step_dir_name(std::string_view name);

// "shard-00003-of-00008.h5".
std::string shard_file_name(unsigned rank, unsigned world_size);

// The file a rank writes its manifest fragment to inside the staging directory.
std::string fragment_file_name(unsigned rank, unsigned world_size);

// ".tmp-step-000001300.<run_id>": hidden, so listings and loaders never see a partial
// checkpoint; the run id keeps a crashed earlier attempt's files out of this one.
std::string staging_dir_name(std::uint64_t step, std::string_view run_id);

struct StagingName {
  std::uint64_t step;
  std::string run_id;
};
std::optional<StagingName> parse_staging_dir_name(std::string_view name);

// ".del-step-000000800.<token>": a checkpoint is renamed to this before its files are
// removed, so that a crash half-way never leaves a half-deleted visible checkpoint. The
// token is random, so nobody can plant something at the name beforehand.
std::string deleting_dir_name(std::uint64_t step, std::string_view token);
bool is_deleting_dir_name(std::string_view name);

// Tensor names are '/'-separated paths of components made of [A-Za-z0-9_.:+-], none
// "." or "..", at most 1024 characters in all ("model/layers.0/attn.qkv.weight").
// Throws dl::InputError naming the tensor and the rule it breaks.
void validate_tensor_name(std::string_view name);

// RNG stream names: one such component ("torch", "cuda:0", "numpy").
void validate_rng_name(std::string_view name);

// Run ids: 1 to 64 characters of [A-Za-z0-9_.-].
void validate_run_id(std::string_view run_id);

// Same rules, without throwing (for data read back from disk).
bool is_valid_tensor_name(std::string_view name);
bool is_valid_rng_name(std::string_view name);

// 2024-05-01T12:00:00Z for a Unix time.
std::string format_utc(std::int64_t unix_seconds);

}  // namespace dl::ckpt
