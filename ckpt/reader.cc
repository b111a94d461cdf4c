// Reading checkpoints: Reader, load_latest, latest_valid, list_checkpoints, prune.
#include <dl/ckpt.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <set>

#include "ckpt/names.h"
#include "ckpt/reshard.h"
#include "ckpt/retention.h"
#include "ckpt/shard.h"
#include "ckpt/store.h"
#include "core/error.h"
#include "core/log.h"
#include "core/sysio.h"

namespace dl::ckpt {

struct Reader::Impl {
  std::string path;
  sys::Fd dir;  // the step directory: shards are opened inside it, never by a path again
  Manifest manifest;
  Metadata meta;
  mutable std::mutex mutex;
  // Shards read from stay open; verify() opens the others only for as long as it needs.
  mutable std::map<unsigned, std::unique_ptr<ShardFile>> open_shards;
  mutable std::set<unsigned> checked;  // ranks whose metadata passed

  ShardFile& shard(unsigned rank) const {
    auto& slot = open_shards[rank];
    if (!slot) {
      auto file = std::make_unique<ShardFile>(dir, manifest, rank);
      check(*file, rank);
      slot = std::move(file);
    }
    return *slot;
  }

  void check(ShardFile& file, unsigned rank) const {
    if (checked.count(rank)) return;
    file.check_metadata();
    checked.insert(rank);
  }

  void read_piece(ShardFile& file, const TensorEntry& t, const Piece& p, void* dst) const {
    if (const std::uint64_t n = piece_bytes(t, p); n > 0) {
      file.read_verified(*p.file_offset, n, dst, p.xxh3, "tensor " + t.name);
    }
  }

  void read_blob(ShardFile& file, const BlobEntry& b, void* dst) const {
    if (b.file_offset) {
      file.read_verified(*b.file_offset, b.bytes, dst, b.xxh3, "RNG state " + b.name);
    }
  }
};

namespace {

Metadata metadata_of(const Manifest& m) {
  Metadata meta;
  meta.step = m.step;
  meta.epoch = m.epoch;
  meta.data_loader_position = m.data_loader_position;
  meta.hyperparameters = m.hyperparameters;
  meta.user_metadata = m.user_metadata;
  meta.metrics = m.metrics;
  return meta;
}

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

// The checkpoint directory `dir` held open: CorruptError if it is not a directory,
// SystemError if it cannot be opened.
sys::Fd open_checkpoint_dir(const std::string& dir) {
  const sys::FileType type = sys::file_type(dir);
  if (type != sys::FileType::directory && type != sys::FileType::missing) {
    throw CorruptError(fmt::format("{}: not a directory", dir));
  }
  return sys::open_dir(dir);
}

}  // namespace

Reader::Reader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Reader::Reader(Reader&&) noexcept = default;
Reader& Reader::operator=(Reader&&) noexcept = default;
Reader::~Reader() = default;

// Opens a Reader on a step directory already held open.
struct ReaderAccess {
  static Reader open(sys::Fd step_dir, const std::string& path, Verify level);
};

Reader Reader::open(const std::string& step_dir, Verify level) {
  return ReaderAccess::open(open_step_dir(step_dir), step_dir, level);
}

Reader ReaderAccess::open(sys::Fd step_dir, const std::string& path, Verify level) {
  auto impl = std::make_unique<Reader::Impl>();
  impl->path = path;
  impl->dir = std::move(step_dir);
  impl->manifest = read_manifest(impl->dir);
  impl->meta = metadata_of(impl->manifest);
  for (const ShardEntry& s : impl->manifest.shards) check_shard_size(impl->dir, s);
  Reader reader(std::move(impl));
  reader.verify(level);
  return reader;
}

const std::string& Reader::path() const { return impl_->path; }
const Metadata& Reader::metadata() const { return impl_->meta; }
unsigned Reader::world_size() const { return impl_->manifest.world_size; }
std::int64_t Reader::created_unix() const { return impl_->manifest.created_unix; }
std::string Reader::host() const { return impl_->manifest.host; }
std::optional<Writer> Reader::writer() const { return impl_->manifest.writer; }
std::uint64_t Reader::bytes() const { return total_bytes(impl_->manifest); }

std::vector<TensorInfo> Reader::tensors() const {
  std::vector<TensorInfo> out;
  for (const TensorEntry& t : impl_->manifest.tensors) {
    TensorInfo info{t.name, t.dtype, t.shape, {}};
    for (const Piece& p : t.pieces) info.ranks.push_back(p.rank);
    std::sort(info.ranks.begin(), info.ranks.end());
    out.push_back(std::move(info));
  }
  return out;
}

std::optional<TensorInfo> Reader::tensor(const std::string& name) const {
  const TensorEntry* t = find_tensor(impl_->manifest, name);
  if (!t) return std::nullopt;
  TensorInfo info{t->name, t->dtype, t->shape, {}};
  for (const Piece& p : t->pieces) info.ranks.push_back(p.rank);
  std::sort(info.ranks.begin(), info.ranks.end());
  return info;
}

void Reader::read(const std::string& name, DType dtype, void* data, const Slice& slice) const {
  const TensorEntry* t = find_tensor(impl_->manifest, name);
  if (!t) throw InputError(fmt::format("checkpoint {} has no tensor {:?}", impl_->path, name));
  if (t->dtype != dtype) {
    throw InputError(fmt::format("tensor {} is {} in checkpoint {}, not {}", name,
                                 dtype_name(t->dtype), impl_->path, dtype_name(dtype)));
  }
  Slice want = slice;
  if (want.offset.empty() && want.shape.empty()) want = {Shape(t->shape.size(), 0), t->shape};
  if (want.offset.empty()) want.offset = Shape(t->shape.size(), 0);
  std::vector<Slice> boxes;
  for (const Piece& p : t->pieces) boxes.push_back(p.slice);
  std::vector<PiecePlan> plans;
  try {
    plans = plan_read(t->shape, boxes, want);
  } catch (const std::invalid_argument& e) {
    throw InputError(fmt::format("tensor {} of shape {} in checkpoint {}: {}", name,
                                 shape_str(t->shape), impl_->path, e.what()));
  }
  const std::size_t elem = dtype_size(dtype);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  std::vector<std::byte> scratch;
  for (const PiecePlan& plan : plans) {
    const Piece& p = t->pieces[plan.piece];
    ShardFile& file = impl_->shard(p.rank);
    if (p.slice.offset == want.offset && p.slice.shape == want.shape) {
      impl_->read_piece(file, *t, p, data);
      continue;
    }
    scratch.resize(static_cast<std::size_t>(piece_bytes(*t, p)));
    impl_->read_piece(file, *t, p, scratch.data());
    for (const CopyRun& run : plan.runs) {
      std::memcpy(static_cast<std::byte*>(data) + run.dst * elem, scratch.data() + run.src * elem,
                  static_cast<std::size_t>(run.count * elem));
    }
  }
}

void Reader::read(const std::vector<Target>& targets) const {
  // Where a target's bytes start: its tensor's first piece (pieces are listed by rank).
  const auto position = [this](const Target& t) {
    const TensorEntry* e = find_tensor(impl_->manifest, t.name);
    if (!e) return std::pair<unsigned, std::uint64_t>(0, 0);  // read() reports it
    const Piece& p = e->pieces.front();
    return std::pair<unsigned, std::uint64_t>(p.rank, p.file_offset.value_or(0));
  };
  std::vector<const Target*> order;
  for (const Target& t : targets) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(),
                   [&](const Target* a, const Target* b) { return position(*a) < position(*b); });
  for (const Target* t : order) read(t->name, t->dtype, t->data, Slice{t->offset, t->shape});
}

std::map<std::string, std::vector<std::uint8_t>> Reader::rng_states(unsigned rank) const {
  std::map<std::string, std::vector<std::uint8_t>> out;
  if (rank >= impl_->manifest.world_size) return out;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  ShardFile& file = impl_->shard(rank);
  for (const BlobEntry& b : impl_->manifest.shards[rank].rng) {
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(b.bytes));
    impl_->read_blob(file, b, bytes.data());
    out.emplace(b.name, std::move(bytes));
  }
  return out;
}

void Reader::verify(Verify level) const {
  if (level == Verify::quick) return;
  const Manifest& m = impl_->manifest;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  for (const ShardEntry& s : m.shards) {
    ShardFile file(impl_->dir, m, s.rank);
    impl_->check(file, s.rank);
    if (level != Verify::full) continue;
    for (const TensorEntry& t : m.tensors) {
      for (const Piece& p : t.pieces) {
        if (p.rank != s.rank) continue;
        if (const std::uint64_t n = piece_bytes(t, p); n > 0) {
          file.verify_range(*p.file_offset, n, p.xxh3, "tensor " + t.name);
        }
      }
    }
    for (const BlobEntry& b : s.rng) {
      if (b.file_offset) file.verify_range(*b.file_offset, b.bytes, b.xxh3, "RNG state " + b.name);
    }
  }
}

std::optional<Loaded> load_latest(const std::string& dir, const std::vector<Target>& targets,
                                  unsigned rank) {
  for (const Target& t : targets) {
    validate_tensor_name(t.name);
    bool empty = false;
    for (std::uint64_t d : t.shape) empty = empty || d == 0;
    if (t.data == nullptr && !empty) {
      throw InputError(fmt::format("target {}: no buffer to fill", t.name));
    }
  }
  if (sys::file_type(dir) == sys::FileType::missing) return std::nullopt;
  for (const StepDir& candidate : committed_steps(dir)) {
    try {
      Reader reader = Reader::open(candidate.path, Verify::quick);
      reader.read(targets);
      return Loaded{reader.path(), reader.metadata(), reader.world_size(), reader.rng_states(rank)};
    } catch (const CorruptError& e) {
      log(LogLevel::warning, "checkpoint {} is unusable, trying an older one: {}", candidate.path,
          e.what());
    } catch (const SystemError& e) {
      log(LogLevel::warning, "checkpoint {} is unusable, trying an older one: {}", candidate.path,
          e.what());
    }
  }
  return std::nullopt;
}

std::optional<std::string> latest_valid(const std::string& dir, Verify level) {
  for (const StepDir& candidate : committed_steps(dir)) {
    try {
      Reader::open(candidate.path, level);
      return candidate.path;
    } catch (const CorruptError& e) {
      log(LogLevel::warning, "checkpoint {} is unusable: {}", candidate.path, e.what());
    } catch (const SystemError& e) {
      log(LogLevel::warning, "checkpoint {} is unusable: {}", candidate.path, e.what());
    }
  }
  return std::nullopt;
}

std::vector<CheckpointInfo> list_checkpoints(const std::string& dir, Verify level) {
  return list_checkpoints(open_checkpoint_dir(dir), level);
}

std::vector<CheckpointInfo> list_checkpoints(const sys::Fd& dir, Verify level) {
  std::vector<StepDir> steps = committed_steps(dir);
  std::reverse(steps.begin(), steps.end());
  const std::optional<std::string> latest = read_latest(dir);
  std::vector<CheckpointInfo> out;
  for (const StepDir& s : steps) {
    CheckpointInfo info;
    info.path = s.path;
    info.step = s.step;
    info.latest = latest && *latest == step_dir_name(s.step);
    try {
      sys::Fd step_dir = open_step_dir(dir, sys::base_name(s.path));
      const Manifest m = read_manifest(step_dir);
      info.meta = metadata_of(m);
      info.world_size = m.world_size;
      info.created_unix = m.created_unix;
      info.bytes = total_bytes(m);
      info.tensors = m.tensors.size();
      info.writer = m.writer;
      ReaderAccess::open(std::move(step_dir), s.path, level);
      info.valid = true;
    } catch (const CorruptError& e) {
      info.problem = e.what();
    } catch (const SystemError& e) {
      info.problem = e.what();
    }
    out.push_back(std::move(info));
  }
  return out;
}

std::vector<std::string> prune(const std::string& dir, const Retention& policy, bool dry_run) {
  validate_retention(policy);
  return prune(open_checkpoint_dir(dir), policy, dry_run);
}

std::vector<std::string> prune(const sys::Fd& dir, const Retention& policy, bool dry_run) {
  validate_retention(policy);
  std::vector<RetentionEntry> entries;
  std::map<std::uint64_t, std::string> paths;
  for (const CheckpointInfo& c : list_checkpoints(dir, Verify::metadata)) {
    entries.push_back({c.step, c.valid, c.meta.metrics});
    paths[c.step] = c.path;
  }
  // Resume takes the newest checkpoint whose every checksum verifies (dlrun's default
  // --resume-verify=full): that one must survive whatever the metadata check says.
  const auto passes_resume_check = [&](std::uint64_t step) {
    try {
      ReaderAccess::open(open_step_dir(dir, sys::base_name(paths.at(step))), paths.at(step),
                         Verify::full);
      return true;
    } catch (const CorruptError& e) {
      log(LogLevel::warning, "checkpoint {} is unusable, retention keeps an older one: {}",
          paths.at(step), e.what());
    } catch (const SystemError& e) {
      log(LogLevel::warning, "checkpoint {} is unusable, retention keeps an older one: {}",
          paths.at(step), e.what());
    }
    return false;
  };
  std::vector<std::string> removed;
  for (std::uint64_t step : steps_to_remove(entries, policy, passes_resume_check)) {
    if (!dry_run) remove_step_dir(dir, sys::base_name(paths.at(step)), step);
    removed.push_back(paths.at(step));
  }
  return removed;
}

}  // namespace dl::ckpt
