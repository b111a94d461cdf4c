// Checkpoint benchmark: a transformer's training state (weights and two Adam moments,
// f32, about 2 GiB in a few hundred tensors) saved and loaded by dl::ckpt, against
// baselines measured in the same run on the same filesystem:
//   - write, fsync included, vs a raw sequential write + fsync of the same bytes;
//   - load (read and verify) vs a raw sequential read of the same bytes, with both files
//     evicted from the page cache (posix_fadvise DONTNEED) before every read;
//   - the training-visible stall of save_async vs a plain memcpy of the state into
//     buffers that were written before (no page faults in either).
// Each measurement alternates baseline and checkpoint (and which goes first), times
// each after an untimed run of the same kind, and reports the median of --repeat runs,
// and the ratio of the fastest runs. Prints GB/s (10^9
// bytes per second) and ratios; asserts nothing.
#include <dl/ckpt.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "core/sysio.h"

namespace {

using Clock = std::chrono::steady_clock;
using dl::ckpt::DType;
using dl::ckpt::Shape;

struct Tensor {
  std::string name;
  Shape shape;
  std::unique_ptr<std::byte[]> data;
  std::size_t bytes = 0;
};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The fastest run: on a shared machine noise only ever adds time.
double best(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

void add(std::vector<Tensor>& out, std::string name, Shape shape) {
  std::size_t n = 4;
  for (auto d : shape) n *= d;
  out.push_back({std::move(name), std::move(shape), std::make_unique<std::byte[]>(n), n});
}

// GPT-style layers with d_model 1024, ffn 4096 and a 32000-token vocabulary, as many as
// fit in `target` bytes once weights, exp_avg and exp_avg_sq are counted.
std::vector<Tensor> make_state(std::uint64_t target) {
  const std::uint64_t d = 1024, ffn = 4096, vocab = 32000;
  const std::vector<std::pair<std::string, Shape>> layer = {{"ln1.weight", {d}},
                                                            {"ln1.bias", {d}},
                                                            {"attn.qkv.weight", {3 * d, d}},
                                                            {"attn.qkv.bias", {3 * d}},
                                                            {"attn.proj.weight", {d, d}},
                                                            {"attn.proj.bias", {d}},
                                                            {"ln2.weight", {d}},
                                                            {"ln2.bias", {d}},
                                                            {"mlp.fc1.weight", {ffn, d}},
                                                            {"mlp.fc1.bias", {ffn}},
                                                            {"mlp.fc2.weight", {d, ffn}},
                                                            {"mlp.fc2.bias", {d}}};
  std::uint64_t per_layer = 0;
  for (const auto& [name, shape] : layer) {
    std::uint64_t n = 12;
    for (auto x : shape) n *= x;
    per_layer += n;
  }
  const std::uint64_t fixed = 12 * (vocab * d + 2 * d);
  // Rounded up: the state is at least `target`.
  const std::uint64_t layers =
      target > fixed ? std::max<std::uint64_t>(1, (target - fixed + per_layer - 1) / per_layer) : 1;
  std::vector<Tensor> out;
  for (const char* group : {"model", "optim/exp_avg", "optim/exp_avg_sq"}) {
    add(out, fmt::format("{}/embed.weight", group), {vocab, d});
    for (std::uint64_t l = 0; l < layers; ++l) {
      for (const auto& [name, shape] : layer) {
        add(out, fmt::format("{}/layers.{}/{}", group, l, name), shape);
      }
    }
    add(out, fmt::format("{}/ln_f.weight", group), {d});
    add(out, fmt::format("{}/ln_f.bias", group), {d});
  }
  // Incompressible, never-zero contents (xorshift), so no layer can take shortcuts.
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  for (Tensor& t : out) {
    auto* words = reinterpret_cast<std::uint64_t*>(t.data.get());
    for (std::size_t i = 0; i < t.bytes / 8; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      words[i] = x;
    }
  }
  return out;
}

void evict(const std::string& path) {
  dl::sys::Fd fd = dl::sys::open_file(path, O_RDONLY);
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
}

void evict_tree(const std::string& dir) {
  for (const std::string& name : dl::sys::list_dir(dir)) {
    const std::string path = dl::sys::join(dir, name);
    if (dl::sys::file_type(path) == dl::sys::FileType::directory) {
      evict_tree(path);
    } else {
      evict(path);
    }
  }
}

// Flushes the filesystem of `dir`, so that one run's deletions and journal traffic are
// not paid by the next run's fsync.
void settle(const std::string& dir) {
  dl::sys::Fd fd = dl::sys::open_file(dir, O_RDONLY | O_DIRECTORY);
  ::syncfs(fd.get());
}

void raw_write(const std::string& path, const std::vector<Tensor>& state) {
  dl::sys::Fd fd = dl::sys::open_file(path, O_WRONLY | O_CREAT | O_TRUNC);
  std::uint64_t offset = 0;
  for (const Tensor& t : state) {
    dl::sys::write_all_at(fd, t.data.get(), t.bytes, offset);
    offset += t.bytes;
  }
  dl::sys::fsync_fd(fd);
  fd.close();
}

void raw_read(const std::string& path, std::vector<Tensor>& dest) {
  dl::sys::Fd fd = dl::sys::open_file(path, O_RDONLY);
  std::uint64_t offset = 0;
  for (Tensor& t : dest) {
    dl::sys::read_exact_at(fd, t.data.get(), t.bytes, offset);
    offset += t.bytes;
  }
}

dl::ckpt::State state_of(const std::vector<Tensor>& tensors, std::uint64_t step) {
  dl::ckpt::State s;
  s.meta.step = step;
  for (const Tensor& t : tensors) s.tensors.push_back({t.name, DType::f32, t.shape, t.data.get()});
  s.rng_states["bench"] = std::vector<std::uint8_t>(5056, 7);
  return s;
}

double memcpy_state(const std::vector<Tensor>& from, std::vector<Tensor>& to) {
  const auto start = Clock::now();
  for (std::size_t i = 0; i < from.size(); ++i) {
    std::memcpy(to[i].data.get(), from[i].data.get(), from[i].bytes);
  }
  return seconds_since(start);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "dl::ckpt benchmark: write, read and async-save throughput against raw I/O baselines",
      "ckpt"};
  std::string dir;
  double gib = 2.0;
  unsigned repeat = 7;
  app.add_option("--dir", dir, "scratch directory on the filesystem to measure (emptied)")
      ->required();
  app.add_option("--gib", gib, "state size in GiB (default 2)")->check(CLI::Range(0.05, 64.0));
  app.add_option("--repeat", repeat, "runs per measurement (default 7)")->check(CLI::Range(1, 50));
  CLI11_PARSE(app, argc, argv);

  try {
    dl::sys::remove_tree(dir);
    dl::sys::make_dirs(dir);
    const std::string raw_path = dl::sys::join(dir, "raw.bin");
    const std::string ckpt_dir = dl::sys::join(dir, "ckpt");
    auto state = make_state(static_cast<std::uint64_t>(gib * (1ull << 30)));
    std::vector<Tensor> dest;  // where loads land; also the memcpy baseline's target
    std::uint64_t total = 0;
    std::size_t smallest = SIZE_MAX, largest = 0;
    for (const Tensor& t : state) {
      total += t.bytes;
      smallest = std::min(smallest, t.bytes);
      largest = std::max(largest, t.bytes);
      Tensor copy{t.name, t.shape, std::make_unique<std::byte[]>(t.bytes), t.bytes};
      std::memset(copy.data.get(), 1, t.bytes);  // fault the pages in once, for every run
      dest.push_back(std::move(copy));
    }
    const double gb = static_cast<double>(total) / 1e9;
    fmt::print("state: {:.2f} GiB in {} f32 tensors ({} KiB to {} MiB), directory {}\n",
               static_cast<double>(total) / (1ull << 30), state.size(), smallest / 1024,
               largest >> 20, dir);

    dl::ckpt::Options opt;
    opt.dir = ckpt_dir;
    dl::ckpt::Checkpointer ckpt(opt);
    std::vector<double> raw_w, ckpt_w, raw_r, ckpt_r;
    std::vector<dl::ckpt::Target> targets;
    for (Tensor& t : dest) targets.push_back({t.name, DType::f32, t.shape, t.data.get()});
    // One write and one read of either kind; only the second pass of each is recorded.
    // On a virtual machine the first reuse of memory another workload freed pays the
    // hypervisor's page faults (seen here as copies into the page cache several times
    // slower); the untimed first pass puts both kinds on the same footing.
    const auto measure = [&](bool checkpoint, std::uint64_t step) {
      for (int pass = 0; pass < 2; ++pass) {
        dl::sys::remove_file(raw_path);
        dl::sys::remove_tree(ckpt_dir);
        dl::sys::make_dirs(ckpt_dir);
        settle(dir);
        auto start = Clock::now();
        if (checkpoint) {
          ckpt.save(state_of(state, step));
        } else {
          raw_write(raw_path, state);
        }
        const double write = seconds_since(start);
        if (checkpoint) {
          evict_tree(ckpt_dir);
        } else {
          evict(raw_path);
        }
        start = Clock::now();
        if (!checkpoint) {
          raw_read(raw_path, dest);
        } else if (!dl::ckpt::load_latest(ckpt_dir, targets)) {
          throw std::runtime_error("the checkpoint did not load");
        }
        const double read = seconds_since(start);
        for (std::size_t k = 0; checkpoint && k < state.size(); ++k) {
          if (std::memcmp(state[k].data.get(), dest[k].data.get(), state[k].bytes) != 0) {
            throw std::runtime_error(fmt::format("tensor {} read back different", state[k].name));
          }
        }
        if (pass == 1) {
          (checkpoint ? ckpt_w : raw_w).push_back(write);
          (checkpoint ? ckpt_r : raw_r).push_back(read);
        }
      }
    };
    for (unsigned i = 0; i < repeat; ++i) {
      // Alternating which goes first cancels drift in the machine's state.
      measure(i % 2 == 1, i + 1);
      measure(i % 2 == 0, i + 1);
    }
    dl::sys::remove_file(raw_path);

    // The first save_async allocates its host buffers; later ones reuse them.
    dl::sys::remove_tree(ckpt_dir);
    dl::sys::make_dirs(ckpt_dir);
    auto start = Clock::now();
    ckpt.save_async(state_of(state, 1000));
    const double first_stall = seconds_since(start);
    ckpt.wait();
    std::vector<double> copies, stalls, persists;
    for (unsigned i = 0; i < repeat; ++i) {
      dl::sys::remove_tree(ckpt_dir);
      dl::sys::make_dirs(ckpt_dir);
      settle(dir);
      copies.push_back(memcpy_state(state, dest));
      start = Clock::now();
      ckpt.save_async(state_of(state, 1001 + i));
      stalls.push_back(seconds_since(start));
      ckpt.wait();
      persists.push_back(seconds_since(start));
    }

    fmt::print(
        "write incl. fsync   raw {:6.2f} GB/s   checkpoint {:6.2f} GB/s   ratio {:.2f} (best runs "
        "{:.2f})   target >= 0.9\n",
        gb / median(raw_w), gb / median(ckpt_w), median(raw_w) / median(ckpt_w),
        best(raw_w) / best(ckpt_w));
    fmt::print(
        "read and verify     raw {:6.2f} GB/s   checkpoint {:6.2f} GB/s   ratio {:.2f} (best runs "
        "{:.2f})   target >= 0.8\n",
        gb / median(raw_r), gb / median(ckpt_r), median(raw_r) / median(ckpt_r),
        best(raw_r) / best(ckpt_r));
    fmt::print(
        "save_async stall    memcpy {:.3f} s ({:.2f} GB/s)   save_async {:.3f} s   ratio {:.2f} "
        "(best runs {:.2f})   target <= 1.2\n",
        median(copies), gb / median(copies), median(stalls), median(stalls) / median(copies),
        best(stalls) / best(copies));
    fmt::print(
        "                    first save_async (allocates its buffers) {:.3f} s; save_async until "
        "durable {:.2f} s\n",
        first_stall, median(persists));
    const auto runs = [](const char* what, const std::vector<double>& v) {
      fmt::print("  {:<22} {:.2f} s\n", what, fmt::join(v, " "));
    };
    fmt::print("runs, in seconds:\n");
    runs("raw write", raw_w);
    runs("checkpoint write", ckpt_w);
    runs("raw read", raw_r);
    runs("checkpoint read", ckpt_r);
    runs("memcpy", copies);
    runs("save_async", stalls);
    fmt::print(
        "medians of {} runs (ratios also of the best runs); page cache evicted with "
        "posix_fadvise(DONTNEED) before each read\n",
        repeat);
    dl::sys::remove_tree(dir);
  } catch (const std::exception& e) {
    fmt::print(stderr, "ckpt benchmark: {}\n", e.what());
    return 1;
  }
  return 0;
}
