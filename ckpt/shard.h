// One rank's HDF5 shard: writing it (the bulk of the bytes through the dl::sys seam, not
// HDF5), and reading it back verified (HDF5's metadata checked against the manifest
// before HDF5 parses it). The phases, and what the check does and does not protect
// against: docs/design/checkpoint-shards.md.
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
