// libFuzzer target that reaches libhdf5: like ckpt_reader_fuzzer, the input becomes a
// checkpoint directory, but before the reader sees it the manifest is made to agree with
// the mutated shards: each shard's size, its metadata checksum (the bytes outside the
// data ranges: HDF5's metadata) and every data checksum are recomputed from the files.
// So mutated HDF5 metadata passes the checksums and libhdf5 parses it, as it would for a
// user who recomputes the checksums of their own checkpoint on purpose. Whatever the
// bytes, the reader must succeed or throw dl::ckpt::CorruptError or dl::SystemError.
//
// Input: as ckpt_reader_fuzzer (records of a 4-byte little-endian length and the bytes:
// manifest.json, then the shards by rank); the seeds are the same real checkpoints.
// libhdf5 itself is not instrumented: a crash inside it shows as a SEGV with libhdf5
// frames, not a sanitizer report of ours (see SECURITY.md, "The checkpoint files").
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "ckpt/manifest.h"
#include "ckpt/xxh.h"
#include "tests/fuzz/ckpt_input.h"

namespace {

using dl::fuzz::Bytes;

std::uint64_t hash(const Bytes& file, std::uint64_t offset, std::uint64_t size) {
  dl::ckpt::Xxh3 h;
  if (offset <= file.size() && size <= file.size() - offset) h.update(file.data() + offset, size);
  return h.digest();
}

// The manifest with every checksum and size recomputed from `shards`, or the text as it
// is when it does not parse (the reader's own checks are then what is fuzzed).
std::string fix_up(const std::string& text, const std::vector<Bytes>& shards) {
  dl::ckpt::Manifest m;
  try {
    m = dl::ckpt::manifest_from_json(text, "manifest.json");
  } catch (const std::exception&) {
    return text;
  }
  for (dl::ckpt::ShardEntry& s : m.shards) {
    if (s.rank >= shards.size()) continue;
    const Bytes& file = shards[s.rank];
    s.bytes = file.size();
    for (dl::ckpt::TensorEntry& t : m.tensors) {
      for (dl::ckpt::Piece& p : t.pieces) {
        if (p.rank != s.rank || !p.file_offset) continue;
        try {
          p.xxh3 = hash(file, *p.file_offset, dl::ckpt::piece_bytes(t, p));
        } catch (const std::exception&) {
        }
      }
    }
    for (dl::ckpt::BlobEntry& b : s.rng) {
      if (b.file_offset) b.xxh3 = hash(file, *b.file_offset, b.bytes);
    }
    try {
      dl::ckpt::Xxh3 h;
      for (const dl::ckpt::ByteRange& gap :
           dl::ckpt::gaps(dl::ckpt::data_ranges(m, s.rank), file.size())) {
        if (gap.offset <= file.size() && gap.size <= file.size() - gap.offset) {
          h.update(file.data() + gap.offset, gap.size);
        }
      }
      s.metadata_xxh3 = h.digest();
    } catch (const std::exception&) {
    }
  }
  try {
    return dl::ckpt::manifest_to_json(m);
  } catch (const std::exception&) {
    return text;
  }
}

// The records with the manifest fixed up to agree with the shards.
void unpack(const std::uint8_t* data, std::size_t size) {
  std::vector<Bytes> records = dl::fuzz::split_records(data, size);
  if (records.empty()) records.emplace_back();
  const std::vector<Bytes> shards(records.begin() + 1, records.end());
  const std::string manifest = fix_up(std::string(records[0].begin(), records[0].end()), shards);
  records[0].assign(manifest.begin(), manifest.end());
  dl::fuzz::write_step(records);
}

void exercise() {
  using dl::ckpt::Verify;
  const std::string step = dl::fuzz::step_dir();
  const dl::ckpt::Reader reader = dl::ckpt::Reader::open(step, Verify::full);
  for (const dl::ckpt::TensorInfo& t : reader.tensors()) {
    std::uint64_t bytes = dl::ckpt::dtype_size(t.dtype);
    for (std::uint64_t d : t.shape) bytes *= d;
    if (bytes > (64u << 20)) continue;
    std::vector<std::uint8_t> buffer(bytes);
    reader.read(t.name, t.dtype, buffer.data());
  }
  for (unsigned rank = 0; rank < reader.world_size() && rank < 3; ++rank) reader.rng_states(rank);
}

}  // namespace

// Small allocations libhdf5 makes on some error paths for mutated metadata and never
// frees (56 bytes, from libhdf5_serial.so frames only, seen within 30 s): HDF5's own
// leak, not ours, and not instrumented. Leaks with a frame of our code still fail.
extern "C" const char* __lsan_default_suppressions() { return "leak:libhdf5_serial.so\n"; }

// libhdf5 1.10.8 itself reads out of bounds on some mutated object headers (an attribute
// message decoded by H5O__attr_decode, found within 30 s): HDF5 is not instrumented, so
// ASan sees it only in the memcpy it calls. Such input can only come from the owner of
// the checkpoint directory (SECURITY.md, "The checkpoint files"); errors in memcpy and
// friends called from our own code still fail.
extern "C" const char* __asan_default_suppressions() {
  return "interceptor_via_lib:libhdf5_serial.so\n";
}

// libhdf5 allocates what mutated metadata says, up to 0xff00000000000098 bytes (seen in
// H5C_protect): glibc's malloc returns NULL for that and libhdf5 fails the read, so ASan
// is made to do the same rather than stop the run.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  return dl::fuzz::initialize("/dev/shm/dl-ckpt-h5-fuzz-XXXXXX");
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return dl::fuzz::run_input(data, size, unpack, exercise);
}
