// export_hdf5: a checkpoint of any world size as one HDF5 file with whole tensors.
#include <dl/ckpt.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include "ckpt/names.h"
#include "ckpt/shard.h"
#include "core/sysio.h"

namespace dl::ckpt {

void export_hdf5(const std::string& step_dir, const std::string& out_file) {
  const Reader reader = Reader::open(step_dir, Verify::metadata);
  const Metadata& meta = reader.metadata();
  Manifest f;
  f.step = meta.step;
  f.epoch = meta.epoch;
  f.data_loader_position = meta.data_loader_position;
  f.hyperparameters = meta.hyperparameters;
  f.user_metadata = meta.user_metadata;
  f.metrics = meta.metrics;
  f.world_size = 1;
  f.created_unix = reader.created_unix();
  f.host = reader.host();
  f.shards.push_back(ShardEntry{0, shard_file_name(0, 1), 0, 0, reader.host(), {}});
  const std::vector<TensorInfo> tensors = reader.tensors();
  for (const TensorInfo& t : tensors) {
    f.tensors.push_back(TensorEntry{
        t.name, t.dtype, t.shape, {Piece{0, Slice{Shape(t.shape.size(), 0), t.shape}, {}, 0}}});
  }
  const auto source = [&](std::size_t i, std::vector<std::byte>& scratch) -> const void* {
    const TensorEntry& t = f.tensors[i];
    scratch.resize(static_cast<std::size_t>(piece_bytes(t, t.pieces.front())));
    reader.read(t.name, t.dtype, scratch.data());
    return scratch.data();
  };
  const sys::Fd out_dir = sys::open_dir(sys::parent_dir(out_file));
  const std::string out_name = sys::base_name(out_file);
  sys::Fd file = sys::create_unique_at(out_dir, "." + out_name + ".tmp.", O_RDWR, 0666);
  const std::string tmp = sys::base_name(file.path());
  try {
    write_shard(file, f, source);
    file.close();
    sys::rename_at(out_dir, tmp, out_dir, out_name);
  } catch (...) {
    sys::calls().unlink(out_dir.get(), tmp.c_str(), 0);
    throw;
  }
  sys::fsync_fd(out_dir);
}

}  // namespace dl::ckpt
