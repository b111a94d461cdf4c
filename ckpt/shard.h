// One rank's HDF5 shard: writing it, and reading it back verified.
//
// Writing goes in four phases, so that the bulk of the bytes moves in large sequential
// pwrite calls through the dl::sys seam rather than through HDF5:
//   1. HDF5 creates the structure: root attributes, and one contiguous dataset per
//      tensor part and RNG state, allocated at creation and never filled;
//   2. the library writes each dataset's bytes at its file offset, hashing every piece
//      while it is still in the cache;
//   3. HDF5 stores the checksums (attributes of fixed size, overwritten in place);
//   4. the bytes outside the datasets (HDF5's metadata) are hashed into the manifest,
//      and the file is fsynced.
// A reader checks the metadata hash against the manifest before HDF5 parses a single
// byte of the file, and HDF5 then opens that very file (through /proc/self/fd), so
// accidental damage (bit rot, a torn or foreign file) never reaches HDF5's parser. This
// is integrity, not authentication: whoever can write the checkpoint directory can also
// rewrite the manifest with matching checksums and feed HDF5 any metadata (the
// ckpt_h5_fuzzer target does exactly that). What keeps other users out is the
// directory itself: it must belong to the job's user and not be writable by others
// (the checkpoint-root check in spank/, the staging-directory check in checkpointer.cc),
// so such metadata can only come from that user, attacking their own job.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/manifest.h"
#include "core/sysio.h"

namespace dl::ckpt {

// The bytes of item `index` of a shard: the fragment's tensors in order, then its RNG
// states. The pointer must stay valid until the next call; `scratch` is the source's to
// fill if it has to materialize the bytes.
using ItemSource = std::function<const void*(std::size_t index, std::vector<std::byte>& scratch)>;

// Writes the shard described by `fragment` (a manifest holding one shard) into `file`, a
// new empty file the caller created (O_CREAT | O_EXCL, opened O_RDWR: HDF5 works on the
// same file through /proc/self/fd, never on a name someone could have planted), and
// fsyncs it. Returns the fragment with file offsets, checksums, file size and metadata
// checksum filled in.
Manifest write_shard(const sys::Fd& file, Manifest fragment, const ItemSource& source);

// "/proc/self/fd/N": the file `fd` holds, by a name only this process resolves.
std::string fd_path(const sys::Fd& fd);

// One shard of a checkpoint being read.
class ShardFile {
 public:
  // Opens the shard inside `dir` (the step directory, held open) without following a link
  // or blocking, and refuses anything but a regular file of the manifest's size.
  ShardFile(const sys::Fd& dir, const Manifest& manifest, unsigned rank);

  const std::string& path() const { return fd_.path(); }

  // The file's size against the manifest (no byte read).
  void check_size() const;

  // Size, metadata checksum and the HDF5 structure against the manifest.
  void check_metadata() const;

  // Reads `size` bytes at `offset` into `dst` and checks their XXH3 against `expected`.
  // `what` names the dataset in the error ("tensor model/w").
  void read_verified(std::uint64_t offset, std::uint64_t size, void* dst, std::uint64_t expected,
                     std::string_view what) const;

  // The same check without keeping the bytes: memory stays at one I/O piece whatever size
  // the manifest claims.
  void verify_range(std::uint64_t offset, std::uint64_t size, std::uint64_t expected,
                    std::string_view what) const;

 private:
  const Manifest& manifest_;
  const ShardEntry& shard_;
  sys::Fd fd_;
};

// The file's type and size against the manifest's record of it (opened as ShardFile
// does, no byte read).
void check_shard_size(const sys::Fd& dir, const ShardEntry& shard);

}  // namespace dl::ckpt
