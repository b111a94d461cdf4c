// libFuzzer target for the checkpoint reader: the input becomes a checkpoint directory
// on disk, which is listed, opened, fully verified and loaded. Whatever the bytes, the
// reader must either succeed or throw dl::ckpt::CorruptError or dl::SystemError; any
// other exception (dl::InputError included: the reads below are consistent with what
// the reader reported), an abort from a broken invariant, or a sanitizer report is a bug.
//
// Input: records of a 4-byte little-endian length and that many bytes; the first record
// is manifest.json, the next ones the shard files of ranks 0, 1, ... The seeds are real
// checkpoints packed this way (see Makefile.am).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/fuzz/ckpt_input.h"

namespace {

using dl::fuzz::root;

void exercise() {
  using dl::ckpt::Verify;
  const std::string step = dl::fuzz::step_dir();
  for (const auto& c : dl::ckpt::list_checkpoints(root(), Verify::full)) {
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
  if (!dl::ckpt::load_latest(root(), targets)) std::abort();  // it just verified
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  return dl::fuzz::initialize("/dev/shm/dl-ckpt-fuzz-XXXXXX");
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return dl::fuzz::run_input(
      data, size, [](auto d, auto n) { dl::fuzz::write_step(dl::fuzz::split_records(d, n)); },
      exercise);
}
