// libFuzzer target for the checkpoint reader: the input becomes a checkpoint directory
// on disk, which is listed, opened, fully verified and loaded. Whatever the bytes, the
// reader must either succeed or throw dl::ckpt::CorruptError or dl::SystemError; any
// other exception (dl::InputError included: the reads below are consistent with what
// the reader reported), an abort from a broken invariant, or a sanitizer report is a bug.
//
// Input: records of a 4-byte little-endian length and that many bytes; the first record
// is manifest.json, the next ones the shard files of ranks 0, 1, ... The seeds are real
// checkpoints packed this way (see Makefile.am).
#include <dl/ckpt.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "ckpt/names.h"
#include "core/error.h"
#include "core/log.h"
#include "core/sysio.h"

namespace {

std::string root;

void write(const std::string& path, const std::uint8_t* data, std::size_t size) {
  dl::sys::Fd fd = dl::sys::open_file(path, O_WRONLY | O_CREAT | O_TRUNC);
  dl::sys::write_all_at(fd, data, size, 0);
  fd.close();
}

// Unpacks the records into ROOT/step-000000001/: the manifest, then one shard per
// further record (at most 4), named for a world size of their number.
void unpack(const std::uint8_t* data, std::size_t size) {
  std::vector<std::pair<const std::uint8_t*, std::size_t>> records;
  while (size > 0 && records.size() < 5) {
    std::uint32_t n = 0;
    for (int i = 0; i < 4 && size > 0; ++i, ++data, --size) n |= std::uint32_t{*data} << (8 * i);
    const std::size_t len = std::min<std::size_t>(n, size);
    records.emplace_back(data, len);
    data += len;
    size -= len;
  }
  const std::string step = dl::sys::join(root, "step-000000001");
  dl::sys::remove_tree(step);
  dl::sys::make_dir(step);
  const unsigned world = records.size() > 1 ? static_cast<unsigned>(records.size() - 1) : 1;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const std::string name = i == 0
                                 ? std::string(dl::ckpt::kManifestName)
                                 : dl::ckpt::shard_file_name(static_cast<unsigned>(i - 1), world);
    write(dl::sys::join(step, name), records[i].first, records[i].second);
  }
}

void exercise() {
  using dl::ckpt::Verify;
  const std::string step = dl::sys::join(root, "step-000000001");
  for (const auto& c : dl::ckpt::list_checkpoints(root, Verify::full)) {
    if (c.valid != c.problem.empty()) std::abort();
  }
  const dl::ckpt::Reader reader = dl::ckpt::Reader::open(step, Verify::full);
  std::vector<dl::ckpt::Target> targets;
  std::vector<std::vector<std::uint8_t>> buffers;
  for (const dl::ckpt::TensorInfo& t : reader.tensors()) {
    std::uint64_t bytes = dl::ckpt::dtype_size(t.dtype);
    for (std::uint64_t d : t.shape) bytes *= d;
    if (bytes > (64u << 20)) continue;  // verified pieces bound it by the input size anyway
    buffers.emplace_back(bytes);
    reader.read(t.name, t.dtype, buffers.back().data());
    // A box across the pieces: the first half of dimension 0.
    if (!t.shape.empty() && t.shape[0] > 1) {
      dl::ckpt::Slice half{dl::ckpt::Shape(t.shape.size(), 0), t.shape};
      half.shape[0] /= 2;
      targets.push_back({t.name, t.dtype, half.shape, buffers.back().data(), half.offset});
    }
  }
  for (unsigned rank = 0; rank < reader.world_size() && rank < 3; ++rank) reader.rng_states(rank);
  if (!dl::ckpt::load_latest(root, targets)) std::abort();  // it just verified
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char tmpl[] = "/dev/shm/dl-ckpt-fuzz-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) std::abort();
  root = tmpl;
  std::atexit([] { dl::sys::remove_tree(root); });
  dl::set_log_sink([](dl::LogLevel, std::string_view) {});  // load_latest warns per bad input
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  unpack(data, size);
  try {
    exercise();
  } catch (const dl::ckpt::CorruptError&) {
  } catch (const dl::SystemError&) {
  }
  return 0;
}
