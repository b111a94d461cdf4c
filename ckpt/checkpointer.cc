// Saving: Checkpointer (sync and async), the commit protocol and retention.
#include <dl/ckpt.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <set>
#include <thread>
#include <vector>

#include "ckpt/async.h"
#include "ckpt/names.h"
#include "ckpt/retention.h"
#include "ckpt/shard.h"
#include "ckpt/store.h"
#include "core/error.h"
#include "core/log.h"
#include "core/parse.h"
#include "core/sysio.h"
#include "core/user_db.h"

namespace dl::ckpt {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

unsigned env_uint(const char* name, std::uint64_t min, std::uint64_t max, unsigned fallback) {
  const std::string v = env(name);
  return v.empty() ? fallback : static_cast<unsigned>(parse_uint(name, v, min, max));
}

std::string user_name(uid_t uid) {
  const auto user = lookup_user(uid);
  return user ? user->name : "";
}

std::string default_run_id(unsigned world_size) {
  if (std::string id = env("DL_CKPT_RUN_ID"); !id.empty()) return id;
  if (std::string job = env("SLURM_JOB_ID"); !job.empty()) {
    const std::string step = env("SLURM_STEP_ID");
    const std::string restart = env("SLURM_RESTART_COUNT");
    return fmt::format("{}.{}.{}", job, step.empty() ? "0" : step, restart.empty() ? "0" : restart);
  }
  if (world_size == 1) return fmt::format("pid{}", ::getpid());
  throw InputError(
      "a checkpoint run id shared by all ranks is needed with more than one rank: set "
      "DL_CKPT_RUN_ID (different for every run), run under Slurm, or set Options::run_id");
}

// A save ready to be written: the fragment to fill in and where its bytes come from.
struct Prepared {
  Manifest fragment;
  std::vector<const void*> sources;  // per item, in the fragment's order
  std::vector<std::uint64_t> sizes;
};

Prepared prepare(const Options& opt, const State& state) {
  Prepared p;
  Manifest& f = p.fragment;
  f.step = state.meta.step;
  f.epoch = state.meta.epoch;
  f.data_loader_position = state.meta.data_loader_position;
  f.world_size = opt.world_size;
  f.created_unix = static_cast<std::int64_t>(std::time(nullptr));
  f.host = sys::hostname();
  f.writer = writer_from_env([](const char* name) { return std::getenv(name); },
                             static_cast<std::uint32_t>(::getuid()), user_name(::getuid()));
  f.hyperparameters = compact_json_object(state.meta.hyperparameters, "checkpoint hyperparameters");
  f.user_metadata = compact_json_object(state.meta.user_metadata, "checkpoint user metadata");
  for (const auto& [name, value] : state.meta.metrics) {
    if (!std::isfinite(value)) {
      throw InputError(fmt::format("checkpoint metric {:?} is {}", name, value));
    }
  }
  f.metrics = state.meta.metrics;

  std::vector<const TensorRef*> tensors;
  for (const TensorRef& t : state.tensors) tensors.push_back(&t);
  std::sort(tensors.begin(), tensors.end(), [](auto* a, auto* b) { return a->name < b->name; });
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorRef& t = *tensors[i];
    validate_tensor_name(t.name);
    if (i > 0 && tensors[i - 1]->name == t.name) {
      throw InputError(fmt::format("tensor {} is given twice", t.name));
    }
    const auto fail = [&](std::string_view what) {
      throw InputError(fmt::format("tensor {}: {}", t.name, what));
    };
    if (t.shape.size() > kMaxDims) fail(fmt::format("more than {} dimensions", kMaxDims));
    TensorEntry e{t.name, t.dtype, t.global_shape.empty() ? t.shape : t.global_shape, {}};
    Piece piece{
        opt.rank, Slice{t.offset.empty() ? Shape(t.shape.size(), 0) : t.offset, t.shape}, {}, 0};
    if (e.shape.size() != t.shape.size() || piece.slice.offset.size() != t.shape.size()) {
      fail("shape, global_shape and offset must have the same number of dimensions");
    }
    for (std::size_t d = 0; d < t.shape.size(); ++d) {
      if (piece.slice.offset[d] > e.shape[d] || t.shape[d] > e.shape[d] - piece.slice.offset[d]) {
        fail(fmt::format(
            "the part at offset [{}] of shape [{}] does not fit in the global shape [{}]",
            fmt::join(piece.slice.offset, ", "), fmt::join(t.shape, ", "),
            fmt::join(e.shape, ", ")));
      }
    }
    std::uint64_t bytes;
    try {
      element_count(e.shape);
      bytes = piece_bytes(e, piece);
    } catch (const CorruptError&) {
      fail("the shape is too large");
    }
    if (bytes > 0 && t.data == nullptr) fail("no data");
    e.pieces.push_back(std::move(piece));
    f.tensors.push_back(std::move(e));
    p.sources.push_back(t.data);
    p.sizes.push_back(bytes);
  }
  ShardEntry shard{opt.rank, shard_file_name(opt.rank, opt.world_size), 0, 0, f.host, {}};
  for (const auto& [name, bytes] : state.rng_states) {
    validate_rng_name(name);
    shard.rng.push_back(BlobEntry{name, bytes.size(), std::nullopt, 0});
    p.sources.push_back(bytes.data());
    p.sizes.push_back(bytes.size());
  }
  f.shards.push_back(std::move(shard));
  return p;
}

}  // namespace

Options Options::from_env(const std::string& dir) {
  Options o;
  o.dir = dir.empty() ? env("DL_CKPT_DIR") : dir;
  if (o.dir.empty()) throw InputError("DL_CKPT_DIR is not set: it names the checkpoint directory");
  o.retention.keep_last = env_uint("DL_CKPT_KEEP", 0, 1000000, 0);
  o.retention.keep_best = env_uint("DL_CKPT_KEEP_BEST", 0, 1000000, 0);
  o.retention.metric = env("DL_CKPT_METRIC");
  const std::string mode = env("DL_CKPT_METRIC_MODE");
  if (mode != "" && mode != "min" && mode != "max") {
    throw InputError(fmt::format("DL_CKPT_METRIC_MODE={}: expected min or max", mode));
  }
  o.retention.higher_is_better = mode == "max";
  if (!env("RANK").empty() || !env("WORLD_SIZE").empty()) {
    o.world_size = env_uint("WORLD_SIZE", 1, kMaxWorldSize, 1);
    o.rank = env_uint("RANK", 0, o.world_size - 1, 0);
  } else {
    o.world_size = env_uint("SLURM_NTASKS", 1, kMaxWorldSize, 1);
    o.rank = env_uint("SLURM_PROCID", 0, o.world_size - 1, 0);
  }
  return o;
}

struct Checkpointer::Impl {
  Options opt;
  sys::Fd dir;  // opt.dir, opened and checked once: saves never walk its path again
  SaveSlot slot;
  std::thread worker;
  // Host copies of the last async save's bytes, reused while the sizes stay the same so
  // that the copy does not pay for page faults every time.
  std::vector<std::unique_ptr<std::byte[]>> buffers;
  std::vector<std::uint64_t> buffer_sizes;
  std::chrono::nanoseconds copy_time{0};
  std::chrono::nanoseconds backpressure_wait{0};

  std::string persist(const Prepared& p);
  void commit(const Manifest& own, const sys::Fd& dir, const sys::Fd& staging);
  void clean_up(const sys::Fd& dir, std::uint64_t committed_step);
  void apply_retention();
};

namespace {

// The staging directory of a save, held open: every file of the save is created inside
// it by descriptor, so nothing planted at a name in the checkpoint directory (a link, a
// FIFO, a directory of someone else's) is ever written through. Alone, a rank never
// reuses one it finds; with other ranks, whichever comes first creates it and the others
// join it only if it is a real directory of this user.
sys::Fd open_staging(const sys::Fd& dir, const std::string& name, bool alone, bool& created) {
  created = sys::make_dir_at(dir, name);
  if (!created && alone) {
    sys::remove_tree_at(dir, name);
    created = sys::make_dir_at(dir, name);
    if (!created) {
      throw SystemError(
          fmt::format("couldn't create {}: it keeps coming back", sys::join(dir.path(), name)));
    }
  }
  sys::Fd staging = sys::open_dir_at(dir, name);
  struct stat st;
  if (::fstat(staging.get(), &st) != 0) {
    throw SystemError(fmt::format("couldn't stat {}: {}", staging.path(), std::strerror(errno)));
  }
  if (st.st_uid != ::geteuid() || (st.st_mode & S_IWOTH)) {
    throw SystemError(fmt::format(
        "refusing staging directory {}: owned by uid {} with mode {:o}, expected this user's "
        "(uid {}) and not writable by others",
        staging.path(), st.st_uid, st.st_mode & 07777, ::geteuid()));
  }
  return staging;
}

}  // namespace

std::string Checkpointer::Impl::persist(const Prepared& p) {
  const Manifest& skeleton = p.fragment;
  const unsigned rank = opt.rank;
  const std::string staging_name = staging_dir_name(skeleton.step, opt.run_id);
  const std::string shard_name = shard_file_name(rank, opt.world_size);
  const std::string fragment_name = fragment_file_name(rank, opt.world_size);
  bool created = false;
  const sys::Fd staging = open_staging(dir, staging_name, opt.world_size == 1, created);
  std::string partial;
  Manifest fragment;
  try {
    // An unpredictable name, created exclusively: a link or FIFO planted at the shard's
    // name is replaced by the rename below, never opened.
    sys::Fd file = sys::create_unique_at(staging, shard_name + ".partial.", O_RDWR, 0666);
    partial = sys::base_name(file.path());
    fragment = write_shard(file, skeleton,
                           [&](std::size_t i, std::vector<std::byte>&) { return p.sources[i]; });
    file.close();
    sys::rename_at(staging, partial, staging, shard_name);
    // The fragment's arrival tells rank 0 that this shard is complete and durable (its
    // fsync of the staging directory covers the rename above). Rank 0's own rename is
    // covered by the same fsync when it writes the manifest.
    if (rank != 0) sys::write_file_durably_at(staging, fragment_name, manifest_to_json(fragment));
  } catch (...) {
    // Leave nothing behind: another attempt must not find a stale shard of ours.
    for (const std::string& name : {partial, shard_name, fragment_name}) {
      if (!name.empty()) sys::calls().unlink(staging.get(), name.c_str(), 0);
    }
    if (created || opt.world_size == 1) {
      sys::calls().unlink(dir.get(), staging_name.c_str(), AT_REMOVEDIR);
    }
    throw;
  }
  if (rank == 0) {
    try {
      commit(fragment, dir, staging);
    } catch (...) {
      // Alone, rank 0 owns the staging directory; with others, their files may be in it
      // and a later commit's clean-up removes it.
      if (opt.world_size == 1) {
        try {
          sys::remove_tree_at(dir, staging_name);
        } catch (const std::exception& e) {
          dl::log(LogLevel::warning, "couldn't remove {}: {}", staging.path(), e.what());
        }
      }
      throw;
    }
  }
  return sys::join(opt.dir, step_dir_name(skeleton.step));
}

void Checkpointer::Impl::commit(const Manifest& own, const sys::Fd& dir, const sys::Fd& staging) {
  const std::uint64_t step = own.step;
  const std::string staging_name = sys::base_name(staging.path());
  std::vector<Manifest> fragments{own};
  if (opt.world_size > 1) {
    std::set<unsigned> missing;
    for (unsigned r = 1; r < opt.world_size; ++r) missing.insert(r);
    const auto deadline = std::chrono::steady_clock::now() + opt.commit_timeout;
    auto pause = std::chrono::milliseconds(5);
    while (!missing.empty()) {
      for (auto it = missing.begin(); it != missing.end();) {
        const std::string name = fragment_file_name(*it, opt.world_size);
        if (sys::file_type_at(staging, name) != sys::FileType::file) {
          ++it;
          continue;
        }
        fragments.push_back(manifest_from_json(sys::read_file_at(staging, name, kMaxManifestBytes),
                                               sys::join(staging.path(), name), true));
        it = missing.erase(it);
      }
      if (missing.empty()) break;
      if (std::chrono::steady_clock::now() > deadline) {
        throw SystemError(
            fmt::format("couldn't commit step {}: no shard from rank(s) {} after {} s in {}", step,
                        fmt::join(missing, ", "), opt.commit_timeout.count(), staging.path()));
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(500));
    }
  }
  const Manifest manifest =
      merge_fragments(std::move(fragments), sys::join(staging.path(), kManifestName));
  for (unsigned r = 1; r < opt.world_size; ++r) {
    sys::remove_file_at(staging, fragment_file_name(r, opt.world_size));
  }
  sys::write_file_durably_at(staging, kManifestName, manifest_to_json(manifest));

  const std::string final_name = step_dir_name(step);
  const std::string final_path = sys::join(opt.dir, final_name);
  if (sys::file_type_at(dir, final_name) == sys::FileType::missing) {
    sys::rename_at(dir, staging_name, dir, final_name);
    sys::fsync_fd(dir);
  } else {
    // Saving a step again replaces it in one atomic exchange; the old copy then goes.
    sys::rename_at(dir, staging_name, dir, final_name, true);
    sys::fsync_fd(dir);
    remove_step_dir(dir, staging_name, step);
  }
  const std::vector<StepDir> steps = committed_steps(dir);
  if (steps.empty() || steps.front().step <= step) write_latest(dir, step);
  dl::log(LogLevel::verbose, "checkpoint {} committed", final_path);

  // The checkpoint is safe now: failures to tidy up are reported, not thrown.
  try {
    clean_up(dir, step);
    apply_retention();
  } catch (const std::exception& e) {
    dl::log(LogLevel::warning, "checkpoint {} committed, but cleaning up {} failed: {}", final_path,
            opt.dir, e.what());
  }
}

void Checkpointer::Impl::clean_up(const sys::Fd& dir, std::uint64_t committed_step) {
  // Everything goes by name relative to `dir` and without following links: a link planted
  // at one of these names is removed as a link.
  for (const std::string& name : sys::list_dir_fd(dir)) {
    if (is_deleting_dir_name(name)) {
      sys::remove_tree_at(dir, name);
    } else if (const auto staging = parse_staging_dir_name(name)) {
      // Other run ids are crashed earlier attempts; ours below this step are saves that
      // never committed. Ours above may be in progress on other ranks.
      if (staging->run_id != opt.run_id || staging->step < committed_step) {
        sys::remove_tree_at(dir, name);
      }
    } else if (name.rfind(std::string(kLatestName) + ".tmp.", 0) == 0) {
      sys::remove_file_at(dir, name);
    }
  }
}

void Checkpointer::Impl::apply_retention() {
  if (opt.retention.keep_last == 0) return;
  for (const std::string& path : prune(dir, opt.retention, false)) {
    dl::log(LogLevel::verbose, "checkpoint {} removed by the retention policy", path);
  }
}

Checkpointer::Checkpointer(Options options) : impl_(std::make_unique<Impl>()) {
  Options& o = impl_->opt;
  o = std::move(options);
  if (o.dir.empty()) throw InputError("the checkpoint directory is empty");
  if (o.world_size < 1 || o.world_size > kMaxWorldSize) {
    throw InputError(
        fmt::format("checkpoint world size {}: expected 1 to {}", o.world_size, kMaxWorldSize));
  }
  if (o.rank >= o.world_size) {
    throw InputError(fmt::format("checkpoint rank {}: expected 0 to {}", o.rank, o.world_size - 1));
  }
  validate_retention(o.retention);
  if (o.run_id.empty()) o.run_id = default_run_id(o.world_size);
  validate_run_id(o.run_id);
  if (o.commit_timeout.count() <= 0) {
    throw InputError("the checkpoint commit timeout must be positive");
  }
  sys::make_dirs(o.dir);
  impl_->dir = open_own_dir(o.dir);
  if (::faccessat(impl_->dir.get(), ".", W_OK | X_OK, 0) != 0) {
    throw SystemError(
        fmt::format("checkpoint directory {} is not writable: {}", o.dir, std::strerror(errno)));
  }
}

Checkpointer::~Checkpointer() {
  if (std::exception_ptr error = impl_->slot.wait_and_take_error()) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      dl::log(LogLevel::error, "the last checkpoint save failed: {}", e.what());
    }
  }
  if (impl_->worker.joinable()) impl_->worker.join();
}

std::string Checkpointer::save(const State& state) {
  impl_->slot.acquire();
  if (impl_->worker.joinable()) impl_->worker.join();
  try {
    std::string path = impl_->persist(prepare(impl_->opt, state));
    impl_->slot.release(nullptr);
    return path;
  } catch (...) {
    impl_->slot.release(nullptr);
    throw;
  }
}

void Checkpointer::save_async(const State& state) {
  impl_->backpressure_wait = impl_->slot.acquire();
  if (impl_->worker.joinable()) impl_->worker.join();
  const auto start = std::chrono::steady_clock::now();
  Prepared p;
  try {
    p = prepare(impl_->opt, state);
    if (impl_->buffer_sizes != p.sizes) {
      impl_->buffers.clear();
      for (std::uint64_t n : p.sizes) impl_->buffers.emplace_back(new std::byte[n]);
      impl_->buffer_sizes = p.sizes;
    }
    for (std::size_t i = 0; i < p.sources.size(); ++i) {
      if (p.sizes[i] > 0) std::memcpy(impl_->buffers[i].get(), p.sources[i], p.sizes[i]);
      p.sources[i] = impl_->buffers[i].get();
    }
  } catch (...) {
    impl_->slot.release(nullptr);
    throw;
  }
  impl_->copy_time = std::chrono::steady_clock::now() - start;
  impl_->worker = std::thread([impl = impl_.get(), p = std::move(p)] {
    try {
      impl->persist(p);
      impl->slot.release(nullptr);
    } catch (const std::exception& e) {
      dl::log(LogLevel::error, "checkpoint step {} failed: {}", p.fragment.step, e.what());
      impl->slot.release(std::current_exception());
    } catch (...) {
      dl::log(LogLevel::error, "checkpoint step {} failed", p.fragment.step);
      impl->slot.release(std::current_exception());
    }
  });
}

void Checkpointer::wait() { impl_->slot.wait(); }

bool Checkpointer::in_flight() const { return impl_->slot.in_flight(); }

std::chrono::nanoseconds Checkpointer::last_copy_time() const { return impl_->copy_time; }

std::chrono::nanoseconds Checkpointer::last_backpressure_wait() const {
  return impl_->backpressure_wait;
}

const Options& Checkpointer::options() const { return impl_->opt; }

}  // namespace dl::ckpt
