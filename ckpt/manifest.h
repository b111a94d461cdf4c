// The manifest: the index of one checkpoint (manifest.json in the step directory) and,
// with a single shard, the fragment one rank writes before rank 0 commits. The JSON
// layout is documented in ckpt/ckpt-format.md; this is its model, its strict parser and
// its writer. The HDF5 shards are cross-checked against it by the ckpt/ adapter.
#pragma once

#include <dl/ckpt_types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dl::ckpt {

inline constexpr char kFormatName[] = "dl-ckpt";
inline constexpr int kFormatVersion = 1;
inline constexpr std::size_t kMaxDims = 32;

// This rank's part of one tensor: a box of the global shape, stored in the rank's shard
// at `file_offset` (absent when it holds no bytes) with the XXH3-64 of its bytes.
struct Piece {
  unsigned rank = 0;
  Slice slice;
  std::optional<std::uint64_t> file_offset;
  std::uint64_t xxh3 = 0;
};

struct TensorEntry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;  // global
  std::vector<Piece> pieces;
};

// A per-rank byte string (an RNG state), stored like a 1-D u8 tensor.
struct BlobEntry {
  std::string name;
  std::uint64_t bytes = 0;
  std::optional<std::uint64_t> file_offset;
  std::uint64_t xxh3 = 0;
};

struct ShardEntry {
  unsigned rank = 0;
  std::string file;
  std::uint64_t bytes = 0;          // size of the HDF5 file
  std::uint64_t metadata_xxh3 = 0;  // XXH3-64 of every byte outside the data ranges
  std::string host;
  std::vector<BlobEntry> rng;
};

struct Manifest {
  int format_version = kFormatVersion;
  std::uint64_t step = 0;
  std::uint64_t epoch = 0;
  std::uint64_t data_loader_position = 0;
  unsigned world_size = 1;
  std::int64_t created_unix = 0;
  std::string host;
  std::string hyperparameters = "{}";  // a JSON object, compact
  std::string user_metadata = "{}";    // a JSON object, compact
  std::map<std::string, double> metrics;
  // Absent in manifests written before the field existed (the format stays version 1:
  // older readers ignore it) and in ones written outside Slurm without a user.
  std::optional<Writer> writer;
  std::vector<ShardEntry> shards;    // by rank
  std::vector<TensorEntry> tensors;  // by name
};

// A byte range of a shard file that holds tensor or RNG data.
struct ByteRange {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

// Bytes of a piece / of a tensor's global shape; throws CorruptError on overflow.
std::uint64_t element_count(const Shape& shape);
std::uint64_t piece_bytes(const TensorEntry& t, const Piece& p);

// Serializes (indented, stable key order). The manifest must be valid.
std::string manifest_to_json(const Manifest& m);

// Parses and validates. `fragment` accepts exactly one shard (the writer's) and does not
// require the pieces to tile the tensors. Throws CorruptError "<path>: <where>: <what>".
Manifest manifest_from_json(std::string_view text, std::string_view path, bool fragment = false);

// The checks manifest_from_json applies, for a manifest built in memory.
void validate_manifest(const Manifest& m, std::string_view path, bool fragment = false);

// Joins the fragments of all ranks (any order) into the checkpoint's manifest. The
// global fields come from rank 0. Throws CorruptError if they disagree on the step or
// the world size, if a rank is missing or twice, or if a tensor's pieces do not tile it.
Manifest merge_fragments(std::vector<Manifest> fragments, std::string_view path);

// The data ranges of one rank's shard, sorted by offset.
std::vector<ByteRange> data_ranges(const Manifest& m, unsigned rank);

// The complement of `ranges` (sorted, disjoint) within [0, file_size).
std::vector<ByteRange> gaps(const std::vector<ByteRange>& ranges, std::uint64_t file_size);

const TensorEntry* find_tensor(const Manifest& m, std::string_view name);

// Total bytes of all shard files.
std::uint64_t total_bytes(const Manifest& m);

// The writer of the calling process: SLURM_JOB_ID, SLURM_ARRAY_JOB_ID and
// SLURM_ARRAY_TASK_ID from `env` (malformed values are ignored, not trusted), `uid`
// and its user name `user`.
Writer writer_from_env(const std::function<const char*(const char*)>& env, std::uint32_t uid,
                       std::string user);

// "job 4711 (user alice, uid 1000)", "array task 100_3 (user alice, uid 1000)", or
// "an unknown job" for a manifest without a writer.
std::string describe_writer(const std::optional<Writer>& w);

// {"val_loss": 1.9} as compact JSON.
std::string metrics_json(const std::map<std::string, double>& metrics);

// Whether `text` is a JSON object no deeper than the manifest allows; returns it in
// compact form. Throws dl::InputError naming `what`.
std::string compact_json_object(std::string_view text, std::string_view what);

// "0123456789abcdef"; parse_hex64 accepts exactly 16 lowercase hex digits.
std::string hex64(std::uint64_t v);
std::optional<std::uint64_t> parse_hex64(std::string_view s);

}  // namespace dl::ckpt
