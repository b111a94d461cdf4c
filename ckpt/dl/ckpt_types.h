// Vocabulary types of the checkpoint library, shared by the pure core (manifests,
// resharding, retention) and the HDF5 adapter. Installed as <dl/ckpt_types.h> and
// included by <dl/ckpt.h>; it depends on the C++17 standard library only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dl::ckpt {

// Element types a checkpoint stores. bf16 is kept as its raw 16 bits (HDF5 uint16 with
// the attribute dtype="bf16") so that every reader gets the exact bits back.
enum class DType : std::uint8_t { f16, bf16, f32, f64, i32, i64, u8 };

inline constexpr DType kAllDTypes[] = {DType::f16, DType::bf16, DType::f32, DType::f64,
                                       DType::i32, DType::i64,  DType::u8};

constexpr std::size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::f16:
    case DType::bf16: return 2;
    case DType::f32:
    case DType::i32: return 4;
    case DType::f64:
    case DType::i64: return 8;
    case DType::u8: return 1;
  }
  return 0;
}

constexpr const char* dtype_name(DType t) noexcept {
  switch (t) {
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
  }
  return "?";
}

inline std::optional<DType> parse_dtype(std::string_view name) noexcept {
  for (DType t : kAllDTypes) {
    if (name == dtype_name(t)) return t;
  }
  return std::nullopt;
}

// Dimensions, outermost first (row-major). An empty shape is a scalar.
using Shape = std::vector<std::uint64_t>;

// A box inside a tensor's global shape: this shard's part when saving, the part a
// reader wants when loading.
struct Slice {
  Shape offset;
  Shape shape;
};

// The part of `global_shape` that rank `rank` of `world` owns when the tensor is split
// along `dim` as numpy.array_split does (the first size % world ranks get one more).
// Throws std::invalid_argument for dim >= rank of the shape or rank >= world.
Slice even_split(const Shape& global_shape, std::size_t dim, unsigned rank, unsigned world);

// The bytes on disk are not a valid checkpoint (truncated, corrupted, not written by
// this library, or of an unsupported format version). The message names the file and
// the reason, e.g. ".../step-000001200/shard-00000-of-00001.h5: tensor model/w: checksum
// mismatch (manifest 1f0e..., data 77a1...)".
class CorruptError : public std::runtime_error {
 public:
  explicit CorruptError(const std::string& message) : std::runtime_error(message) {}
};

// What is kept when old checkpoints are removed: the `keep_last` newest plus the
// `keep_best` best by `metric` (lowest first unless `higher_is_better`). keep_last = 0
// keeps everything. The newest valid checkpoint is never removed.
struct Retention {
  unsigned keep_last = 0;
  unsigned keep_best = 0;
  std::string metric;
  bool higher_is_better = false;
};

// Who wrote a checkpoint: the Slurm job (or array task) and the user, taken from the
// writer's environment (SLURM_JOB_ID, SLURM_ARRAY_JOB_ID, SLURM_ARRAY_TASK_ID) and
// its real uid. Job ids are decimal digits; empty when not known (outside Slurm).
struct Writer {
  std::string job_id;
  std::string array_job_id;  // both set for an array task, both empty otherwise
  std::string array_task_id;
  std::string user;  // the user name of `uid`, empty if it has none
  std::uint32_t uid = 0;

  // The job a checkpoint directory belongs to: "100_3" for an array task, "4711" for
  // any other job, "" outside Slurm. Requeues keep it, resubmissions do not.
  std::string job_key() const {
    if (!array_job_id.empty() && !array_task_id.empty()) return array_job_id + "_" + array_task_id;
    return job_id;
  }
};

}  // namespace dl::ckpt
