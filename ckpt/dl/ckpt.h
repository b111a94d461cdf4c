// dl::ckpt: resumable, verified, atomic checkpoints in HDF5.
//
// A checkpoint is a step directory holding one HDF5 shard per rank and a manifest:
//
//   DIR/step-000001200/manifest.json
//   DIR/step-000001200/shard-00000-of-00004.h5 ... shard-00003-of-00004.h5
//   DIR/latest                                  "step-000001200"
//
// Every dataset carries an XXH3-64 checksum that is verified whenever it is read. A
// checkpoint appears under its final name only once all its files are on disk (temporary
// name, fsync, rename, fsync of the directory), so a crash at any instant leaves the
// previous checkpoint loadable and no partial one visible. The format is described in
// ckpt-format.md (installed with the documentation).
//
// Saving, on every rank:
//
//   dl::ckpt::Checkpointer ckpt(dl::ckpt::Options::from_env());   // or fill Options
//   dl::ckpt::State state;
//   state.meta.step = step;
//   state.tensors.push_back({"model/w", DType::f32, {rows, cols}, w.data(),
//                            {world * rows, cols}, {rank * rows, 0}});   // this rank's rows
//   state.rng_states["std::mt19937"] = rng_bytes;
//   ckpt.save_async(state);  // returns once the tensors are copied
//
// Loading (also with another world size than the one that saved):
//
//   auto loaded = dl::ckpt::load_latest(dir, {{"model/w", DType::f32, {rows, cols},
//                                              w.data(), {rank * rows, 0}}}, rank);
//
// Errors are exceptions: std::invalid_argument (dl::InputError) for bad arguments,
// std::runtime_error for the rest: dl::SystemError (I/O, HDF5) and dl::ckpt::CorruptError
// (the files are not a valid checkpoint). Their messages name the path and the reason.
#pragma once

#include <dl/ckpt_types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dl::ckpt {

// Global training state, the same on every rank.
struct Metadata {
  std::uint64_t step = 0;
  std::uint64_t epoch = 0;
  std::uint64_t data_loader_position = 0;  // e.g. samples consumed in the current epoch
  std::string hyperparameters = "{}";      // a JSON object
  std::string user_metadata = "{}";        // a JSON object
  std::map<std::string, double> metrics;   // e.g. {"val_loss": 1.93}; for keep-best retention
};

// One tensor, or this rank's part of it, to save. Row-major, little-endian, tightly
// packed: product(shape) * dtype_size(dtype) bytes at `data`.
struct TensorRef {
  std::string name;  // '/'-separated, e.g. "model/layers.0/attn.qkv.weight"
  DType dtype = DType::f32;
  Shape shape;  // this rank's part
  const void* data = nullptr;
  Shape global_shape = {};  // empty: same as shape (the tensor is not split)
  Shape offset = {};        // where this part starts in the global tensor; empty: zeros
};

// What one rank saves. Ranks may hold different tensors; the parts of a tensor must tile
// it exactly, and identical parts on several ranks (replicas) are stored once per rank.
struct State {
  Metadata meta;
  std::vector<TensorRef> tensors;
  std::map<std::string, std::vector<std::uint8_t>> rng_states;  // this rank's RNG states
};

struct Options {
  std::string dir;  // the checkpoint directory; created if missing
  unsigned rank = 0;
  unsigned world_size = 1;
  Retention retention;  // applied by rank 0 after every save
  // Shared by all ranks of one run and different for every new run (or restart), so that
  // files a crashed earlier attempt left in a staging directory are never mixed into this
  // one. Default: $DL_CKPT_RUN_ID, else "$SLURM_JOB_ID.$SLURM_STEP_ID.$SLURM_RESTART_COUNT";
  // with one rank, "pid<pid>" if neither is set.
  std::string run_id;
  // How long rank 0 waits for the other ranks' shards before the save fails.
  std::chrono::seconds commit_timeout{600};

  // Options from the environment: DL_CKPT_DIR (required unless `dir` is given), DL_CKPT_KEEP,
  // DL_CKPT_KEEP_BEST, DL_CKPT_METRIC, DL_CKPT_METRIC_MODE (min or max), DL_CKPT_RUN_ID,
  // the rank and world size from RANK/WORLD_SIZE (torchrun) or SLURM_PROCID/SLURM_NTASKS.
  // Throws dl::InputError naming the variable for a bad value.
  static Options from_env(const std::string& dir = {});
};

// Saves checkpoints of one rank. Rank 0 commits a step once every rank's shard is on disk:
// it writes the manifest, renames the step directory into place, updates `latest` and
// applies the retention policy. Other ranks return once their shard is durable.
class Checkpointer {
 public:
  // Validates the options (dl::InputError) and checks that the directory is writable
  // (dl::SystemError).
  explicit Checkpointer(Options options);
  // Waits for a save in flight; its error, if any, is logged (a destructor cannot throw).
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Saves synchronously (after waiting for an asynchronous save in flight) and returns
  // the step directory's path. On rank 0 the checkpoint is committed when this returns.
  std::string save(const State& state);

  // Copies the tensors and RNG states into host buffers kept between saves (this copy
  // is all the caller waits for) and writes them on a background thread. If a save is
  // still in flight, waits for it first (back-pressure). The error of a failed
  // background save is logged when it happens and thrown by the next call to
  // save_async, save or wait.
  void save_async(const State& state);

  // Waits for the save in flight and throws its error.
  void wait();
  bool in_flight() const;

  // Time the last save_async spent copying, and waiting for the previous save.
  std::chrono::nanoseconds last_copy_time() const;
  std::chrono::nanoseconds last_backpressure_wait() const;

  const Options& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// How much of a checkpoint to check, from cheap to thorough:
//   quick:    manifest parsed and consistent, every shard file present with its size
//             (no shard byte read; one stat per shard);
//   metadata: also every shard's HDF5 metadata checksum and structure (a few KB read per
//             shard);
//   full:     also every dataset's checksum (reads everything).
enum class Verify { quick, metadata, full };

struct TensorInfo {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;                  // global
  std::vector<unsigned> ranks;  // the ranks holding a part
};

// A region of a tensor to restore: the box at `offset` of size `shape` in the global
// tensor (empty offset: zeros).
struct Target {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  void* data = nullptr;
  Shape offset = {};
};

// Reads one checkpoint (a step directory). Every read verifies the checksums of the
// datasets it touches and, once per shard, the shard's metadata.
class Reader {
 public:
  // Throws CorruptError (not a checkpoint, corrupt, unsupported version) or SystemError.
  static Reader open(const std::string& step_dir, Verify level = Verify::quick);
  Reader(Reader&&) noexcept;
  Reader& operator=(Reader&&) noexcept;
  ~Reader();

  const std::string& path() const;
  const Metadata& metadata() const;
  unsigned world_size() const;
  std::int64_t created_unix() const;
  std::string host() const;                 // of rank 0
  std::optional<Writer> writer() const;     // absent in older checkpoints
  std::uint64_t bytes() const;              // all shard files
  std::vector<TensorInfo> tensors() const;  // sorted by name
  std::optional<TensorInfo> tensor(const std::string& name) const;

  // Fills `data` with the box `slice` of the tensor's global shape (row-major in the
  // box's shape); an empty slice means the whole tensor. The box may span the parts of
  // any number of ranks: this is how a world size W' reads what W wrote. Parts that are
  // only partly needed are read whole, to verify their checksum.
  void read(const std::string& name, DType dtype, void* data, const Slice& slice = {}) const;

  // Fills every target as read() would, in the order of the bytes on disk (the caller's
  // order, e.g. a model's, is rarely the file's, which is by name).
  void read(const std::vector<Target>& targets) const;

  // The RNG states rank `rank` saved (empty if the checkpoint has fewer ranks).
  std::map<std::string, std::vector<std::uint8_t>> rng_states(unsigned rank) const;

  // Checks what the level asks for that open() did not check yet.
  void verify(Verify level) const;

 private:
  struct Impl;
  friend struct ReaderAccess;
  explicit Reader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct Loaded {
  std::string path;
  Metadata meta;
  unsigned world_size = 0;                                      // of the run that saved it
  std::map<std::string, std::vector<std::uint8_t>> rng_states;  // of `rank`, if it existed
};

// Restores the newest checkpoint in `dir` whose targets read back verified. A corrupt or
// truncated newer checkpoint gives one warning (through dl::log) naming the file and the
// reason, and the next older one is tried. Returns nullopt if `dir` holds no usable
// checkpoint. Throws dl::InputError if a target names a tensor the checkpoint does not
// have, with another dtype, or outside its shape. With several ranks, each rank decides
// on its own: compare the returned steps if the ranks must agree.
std::optional<Loaded> load_latest(const std::string& dir, const std::vector<Target>& targets,
                                  unsigned rank = 0);

// The newest checkpoint in `dir` that passes `level`, or nullopt. Cost: one directory
// listing plus, per checkpoint tried (newest first), what `level` reads.
std::optional<std::string> latest_valid(const std::string& dir, Verify level = Verify::quick);

struct CheckpointInfo {
  std::string path;
  std::uint64_t step = 0;
  bool valid = false;
  std::string problem;  // why it is not valid
  bool latest = false;  // DIR/latest names it
  // From the manifest, when it could be read:
  Metadata meta;
  unsigned world_size = 0;
  std::int64_t created_unix = 0;
  std::uint64_t bytes = 0;
  std::size_t tensors = 0;
  std::optional<Writer> writer;  // absent in older checkpoints
};

// Every step directory in `dir`, oldest first, checked at `level`. Throws SystemError if
// `dir` cannot be listed and CorruptError if it is not a directory.
std::vector<CheckpointInfo> list_checkpoints(const std::string& dir,
                                             Verify level = Verify::metadata);

// Removes what `policy` does not keep and returns the removed paths; with dry_run, only
// returns them. Checkpoints are judged at Verify::metadata, and before anything goes the
// newest ones at Verify::full, newest first, until one passes: the checkpoint a restart
// resumes from is never removed (a newer one with corrupt data does not count as kept).
std::vector<std::string> prune(const std::string& dir, const Retention& policy,
                               bool dry_run = false);

// Writes the checkpoint at `step_dir` as one HDF5 file with every tensor whole (the
// layout of a world-size-1 shard: /tensors/<name>, metadata as root attributes), fully
// verified on the way. The file appears under `out_file` only when complete.
void export_hdf5(const std::string& step_dir, const std::string& out_file);

}  // namespace dl::ckpt
