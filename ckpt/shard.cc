#include "ckpt/shard.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "ckpt/h5.h"
#include "ckpt/names.h"
#include "ckpt/xxh.h"
#include "core/error.h"

namespace dl::ckpt {
namespace {

// Data moves in pieces of this size: large enough for the disk to stream, small enough
// to be hashed while still in the CPU cache right before (or after) the system call.
constexpr std::size_t kIoPiece = std::size_t{4} << 20;

std::string tensor_dataset(const TensorEntry& t) { return "tensors/" + t.name; }
std::string rng_dataset(const BlobEntry& b) { return "rng/" + b.name; }

std::uint64_t stat_size(const sys::Fd& fd) {
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    throw SystemError(fmt::format("couldn't stat {}: {}", fd.path(), std::strerror(errno)));
  }
  return static_cast<std::uint64_t>(st.st_size);
}

// XXH3 of every byte of the file outside the data ranges: the HDF5 metadata.
std::uint64_t metadata_checksum(const sys::Fd& fd, const std::vector<ByteRange>& data,
                                std::uint64_t file_size) {
  Xxh3 hash;
  std::vector<std::byte> buf;
  for (const ByteRange& gap : gaps(data, file_size)) {
    for (std::uint64_t done = 0; done < gap.size;) {
      const std::size_t n =
          static_cast<std::size_t>(std::min<std::uint64_t>(gap.size - done, kIoPiece));
      buf.resize(n);
      sys::read_exact_at(fd, buf.data(), n, gap.offset + done);
      hash.update(buf.data(), n);
      done += n;
    }
  }
  return hash.digest();
}

void write_root_attributes(const h5::File& file, const Manifest& f) {
  const ShardEntry& s = f.shards.front();
  const hid_t root = file.get();
  h5::write_attr(file, root, "dl_format", std::string(kFormatName));
  h5::write_attr(file, root, "format_version", static_cast<std::uint64_t>(f.format_version));
  h5::write_attr(file, root, "step", f.step);
  h5::write_attr(file, root, "epoch", f.epoch);
  h5::write_attr(file, root, "data_loader_position", f.data_loader_position);
  h5::write_attr(file, root, "rank", static_cast<std::uint64_t>(s.rank));
  h5::write_attr(file, root, "world_size", static_cast<std::uint64_t>(f.world_size));
  h5::write_attr(file, root, "host", s.host);
  h5::write_attr(file, root, "created", format_utc(f.created_unix));
  h5::write_attr(file, root, "created_unix", f.created_unix);
  h5::write_attr(file, root, "hyperparameters", f.hyperparameters);
  h5::write_attr(file, root, "user_metadata", f.user_metadata);
  h5::write_attr(file, root, "metrics", metrics_json(f.metrics));
}

// Phase 1: the structure, with placeholder checksums. Fills in the file offsets.
void create_structure(const sys::Fd& fd, Manifest& f) {
  h5::File file = h5::create_file(fd_path(fd), fd.path());
  write_root_attributes(file, f);
  for (TensorEntry& t : f.tensors) {
    Piece& p = t.pieces.front();
    h5::Handle ds = h5::create_contiguous_dataset(file, tensor_dataset(t), t.dtype, p.slice.shape);
    h5::write_attr(file, ds.get(), "dtype", std::string(dtype_name(t.dtype)));
    h5::write_attr(file, ds.get(), "global_shape", t.shape);
    h5::write_attr(file, ds.get(), "offset", p.slice.offset);
    h5::write_attr(file, ds.get(), "xxh3_64", std::uint64_t{0});
    p.file_offset = piece_bytes(t, p) > 0 ? h5::dataset_offset(file, ds) : std::nullopt;
  }
  for (BlobEntry& b : f.shards.front().rng) {
    h5::Handle ds = h5::create_contiguous_dataset(file, rng_dataset(b), DType::u8, {b.bytes});
    h5::write_attr(file, ds.get(), "dtype", std::string(dtype_name(DType::u8)));
    h5::write_attr(file, ds.get(), "xxh3_64", std::uint64_t{0});
    b.file_offset = b.bytes > 0 ? h5::dataset_offset(file, ds) : std::nullopt;
  }
  file.close();
}

// Starts the disk writing what was written so far, a window at a time, so that the disk
// works while the next pieces are hashed and copied and the final fsync only waits for
// the tail. Without it nothing reaches the disk before the fsync (the state fits in the
// page cache), and the disk idles while the CPU hashes. Measured on this project's
// machine, 64 MiB windows beat both 4 MiB (many small writebacks fragment the file) and
// 256 MiB. A hint only: its errors resurface at the fsync that makes the file durable.
class WriteBehind {
 public:
  explicit WriteBehind(const sys::Fd& fd) : fd_(fd) {}
  void wrote(std::uint64_t offset, std::uint64_t n) {
    if (end_ == 0) start_ = offset;
    end_ = std::max(end_, offset + n);
    if (end_ - start_ >= kWindow) {
      ::sync_file_range(fd_.get(), static_cast<off_t>(start_), static_cast<off_t>(end_ - start_),
                        SYNC_FILE_RANGE_WRITE);
      start_ = end_;
    }
  }

 private:
  static constexpr std::uint64_t kWindow = std::uint64_t{64} << 20;
  const sys::Fd& fd_;
  std::uint64_t start_ = 0;
  std::uint64_t end_ = 0;
};

// Phase 2: one dataset's bytes, hashed piece by piece just before each piece is written.
std::uint64_t write_data(const sys::Fd& fd, WriteBehind& behind, const void* data,
                         std::uint64_t size, const std::optional<std::uint64_t>& offset,
                         std::string_view what) {
  Xxh3 hash;
  if (size == 0) return hash.digest();
  if (!offset) {
    throw SystemError(
        fmt::format("couldn't write {}: HDF5 allocated no storage for {}", fd.path(), what));
  }
  const auto* bytes = static_cast<const std::byte*>(data);
  for (std::uint64_t done = 0; done < size;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(size - done, kIoPiece));
    hash.update(bytes + done, n);
    sys::write_all_at(fd, bytes + done, n, *offset + done);
    behind.wrote(*offset + done, n);
    done += n;
  }
  return hash.digest();
}

// Phase 3.
void store_checksums(const sys::Fd& fd, const Manifest& f) {
  h5::File file = h5::open_file(fd_path(fd), true, fd.path());
  for (const TensorEntry& t : f.tensors) {
    h5::Handle ds = h5::open_dataset(file, tensor_dataset(t));
    h5::overwrite_attr(file, ds.get(), "xxh3_64", t.pieces.front().xxh3);
  }
  for (const BlobEntry& b : f.shards.front().rng) {
    h5::Handle ds = h5::open_dataset(file, rng_dataset(b));
    h5::overwrite_attr(file, ds.get(), "xxh3_64", b.xxh3);
  }
  file.close();
}

[[noreturn]] void corrupt(const std::string& path, std::string_view what) {
  throw CorruptError(fmt::format("{}: {}", path, what));
}

void check_size_is(const std::string& path, std::uint64_t size, std::uint64_t expected) {
  if (size != expected) {
    corrupt(path, fmt::format("{} bytes, the manifest says {}{}", size, expected,
                              size < expected ? " (truncated)" : ""));
  }
}

// The HDF5 side of a shard must say what the manifest says. HDF5 reads the very file
// whose metadata checksum was just verified (through /proc/self/fd), not whatever the
// name points to by now.
void check_structure(const sys::Fd& fd, const Manifest& m, const ShardEntry& s) {
  const std::string& path = fd.path();
  h5::File file = h5::open_file(fd_path(fd), false, path);
  const hid_t root = file.get();
  // No string attribute is read here ("dl_format", "dtype" are for h5py users): libhdf5
  // allocates whatever length a variable-length string in the file claims (up to 4 GiB)
  // before reading it. The numeric attributes and the dataset types say the same.
  const std::uint64_t version = h5::read_attr_u64(file, root, "format_version");
  if (version != static_cast<std::uint64_t>(m.format_version)) {
    corrupt(path,
            fmt::format("format version {}, the manifest says {}", version, m.format_version));
  }
  const std::uint64_t step = h5::read_attr_u64(file, root, "step");
  const std::uint64_t rank = h5::read_attr_u64(file, root, "rank");
  const std::uint64_t world = h5::read_attr_u64(file, root, "world_size");
  if (step != m.step || rank != s.rank || world != m.world_size) {
    corrupt(path,
            fmt::format("holds step {} rank {} of {}, the manifest says step {} rank {} of {}",
                        step, rank, world, m.step, s.rank, m.world_size));
  }
  const auto check_dataset = [&](const std::string& name, DType dtype, const Shape& shape,
                                 const std::optional<std::uint64_t>& offset, std::uint64_t xxh3) {
    h5::Handle ds = h5::open_dataset(file, name);
    if (!h5::dataset_is_contiguous(file, ds)) {
      corrupt(path, fmt::format("{} is not contiguous", name));
    }
    if (!h5::dataset_has_type(file, ds, dtype)) {
      corrupt(path, fmt::format("{} is not stored as {}", name, dtype_name(dtype)));
    }
    if (h5::dataset_shape(file, ds) != shape) {
      corrupt(path, fmt::format("{}: shape differs from the manifest", name));
    }
    if (h5::dataset_offset(file, ds) != offset) {
      corrupt(path, fmt::format("{}: file offset differs from the manifest", name));
    }
    if (h5::read_attr_u64(file, ds.get(), "xxh3_64") != xxh3) {
      corrupt(path, fmt::format("{}: checksum attribute differs from the manifest", name));
    }
    return ds;
  };
  for (const TensorEntry& t : m.tensors) {
    for (const Piece& p : t.pieces) {
      if (p.rank != s.rank) continue;
      h5::Handle ds =
          check_dataset(tensor_dataset(t), t.dtype, p.slice.shape, p.file_offset, p.xxh3);
      if (h5::read_attr_u64s(file, ds.get(), "global_shape") != t.shape ||
          h5::read_attr_u64s(file, ds.get(), "offset") != p.slice.offset) {
        corrupt(path, fmt::format("{}: its place in the global tensor differs from the manifest",
                                  tensor_dataset(t)));
      }
    }
  }
  for (const BlobEntry& b : s.rng) {
    check_dataset(rng_dataset(b), DType::u8, {b.bytes}, b.file_offset, b.xxh3);
  }
  file.close();
}

}  // namespace

std::string fd_path(const sys::Fd& fd) { return fmt::format("/proc/self/fd/{}", fd.get()); }

Manifest write_shard(const sys::Fd& fd, Manifest f, const ItemSource& source) {
  h5::ErrorSilencer quiet;
  create_structure(fd, f);
  std::vector<std::byte> scratch;
  WriteBehind behind(fd);
  std::size_t index = 0;
  for (TensorEntry& t : f.tensors) {
    Piece& p = t.pieces.front();
    p.xxh3 = write_data(fd, behind, source(index++, scratch), piece_bytes(t, p), p.file_offset,
                        "tensor " + t.name);
  }
  ShardEntry& s = f.shards.front();
  for (BlobEntry& b : s.rng) {
    b.xxh3 = write_data(fd, behind, source(index++, scratch), b.bytes, b.file_offset,
                        "RNG state " + b.name);
  }
  store_checksums(fd, f);
  s.bytes = stat_size(fd);
  s.metadata_xxh3 = metadata_checksum(fd, data_ranges(f, s.rank), s.bytes);
  sys::fsync_fd(fd);
  validate_manifest(f, fd.path(), true);
  return f;
}

namespace {

// O_NONBLOCK: a FIFO planted at the name opens at once (and is refused below) instead of
// waiting for a writer; O_NOFOLLOW (open_at): a link to /dev/zero or elsewhere is refused.
sys::Fd open_shard(const sys::Fd& dir, const ShardEntry& shard) {
  if (sys::file_type_at(dir, shard.file) == sys::FileType::missing) {
    corrupt(sys::join(dir.path(), shard.file), "missing");
  }
  sys::Fd fd;
  try {
    fd = sys::open_at(dir, shard.file, O_RDONLY | O_NONBLOCK);
  } catch (const SystemError& e) {
    throw CorruptError(e.what());  // a link, say: not a shard this library wrote
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    throw SystemError(fmt::format("couldn't stat {}: {}", fd.path(), std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) corrupt(fd.path(), "not a regular file");
  check_size_is(fd.path(), static_cast<std::uint64_t>(st.st_size), shard.bytes);
  return fd;
}

}  // namespace

void check_shard_size(const sys::Fd& dir, const ShardEntry& shard) { open_shard(dir, shard); }

ShardFile::ShardFile(const sys::Fd& dir, const Manifest& manifest, unsigned rank)
    : manifest_(manifest), shard_(manifest.shards.at(rank)), fd_(open_shard(dir, shard_)) {}

void ShardFile::check_size() const { check_size_is(path(), stat_size(fd_), shard_.bytes); }

// The most HDF5 metadata a shard of `m` can have: the superblock, groups and attributes
// this library writes are a few KiB per dataset, plus the root attributes that hold the
// JSON the user gave (twice over for HDF5's own copies and alignment). More is not a shard
// of ours, and reading it (a sparse file of a TiB, say) would take hours.
std::uint64_t max_metadata_bytes(const Manifest& m, const ShardEntry& s) {
  const std::uint64_t datasets = m.tensors.size() + s.rng.size();
  return (std::uint64_t{64} << 20) + (std::uint64_t{64} << 10) * datasets +
         2 * (m.hyperparameters.size() + m.user_metadata.size() + m.host.size() +
              metrics_json(m.metrics).size());
}

void ShardFile::check_metadata() const {
  check_size();
  const std::vector<ByteRange> data = data_ranges(manifest_, shard_.rank);
  std::uint64_t metadata = 0;
  for (const ByteRange& gap : gaps(data, shard_.bytes)) metadata += gap.size;
  if (metadata > max_metadata_bytes(manifest_, shard_)) {
    corrupt(path(), fmt::format("{} bytes outside its datasets, more than a shard's HDF5 "
                                "metadata can be ({} at most)",
                                metadata, max_metadata_bytes(manifest_, shard_)));
  }
  const std::uint64_t sum = metadata_checksum(fd_, data, shard_.bytes);
  if (sum != shard_.metadata_xxh3) {
    corrupt(path(), fmt::format("HDF5 metadata checksum mismatch (manifest {}, file {})",
                                hex64(shard_.metadata_xxh3), hex64(sum)));
  }
  h5::ErrorSilencer quiet;
  try {
    check_structure(fd_, manifest_, shard_);
  } catch (const SystemError& e) {
    corrupt(path(), fmt::format("does not match the manifest: {}", e.what()));
  }
}

void ShardFile::read_verified(std::uint64_t offset, std::uint64_t size, void* dst,
                              std::uint64_t expected, std::string_view what) const {
  Xxh3 hash;
  auto* bytes = static_cast<std::byte*>(dst);
  for (std::uint64_t done = 0; done < size;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(size - done, kIoPiece));
    sys::read_exact_at(fd_, bytes + done, n, offset + done);
    hash.update(bytes + done, n);
    done += n;
  }
  if (hash.digest() != expected) {
    corrupt(path(), fmt::format("{}: checksum mismatch (manifest {}, data {})", what,
                                hex64(expected), hex64(hash.digest())));
  }
}

void ShardFile::verify_range(std::uint64_t offset, std::uint64_t size, std::uint64_t expected,
                             std::string_view what) const {
  Xxh3 hash;
  std::vector<std::byte> buf(static_cast<std::size_t>(std::min<std::uint64_t>(size, kIoPiece)));
  for (std::uint64_t done = 0; done < size;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(size - done, kIoPiece));
    sys::read_exact_at(fd_, buf.data(), n, offset + done);
    hash.update(buf.data(), n);
    done += n;
  }
  if (hash.digest() != expected) {
    corrupt(path(), fmt::format("{}: checksum mismatch (manifest {}, data {})", what,
                                hex64(expected), hex64(hash.digest())));
  }
}

}  // namespace dl::ckpt
