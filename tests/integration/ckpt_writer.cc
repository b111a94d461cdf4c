// The checkpoint integration tests' training stand-in. Its tensors have deterministic
// contents (every bit pattern, so NaNs too), a function of the tensor's name and the
// step, so any process can check what another saved.
//
//   ckpt_writer save --dir D --step S [--dump DIR] [--mib M] [--keep N]
//       saves step S as rank $SLURM_PROCID of $SLURM_NTASKS (or --rank/--world), each
//       rank its rows of every tensor; --dump writes each global tensor's bytes to
//       DIR/<name with / as _>.bin for h5py to compare with.
//   ckpt_writer loop --dir D [--mib M] [--keep N]
//       resumes from the newest checkpoint (checking it) and saves steps after it,
//       asynchronously, until killed.
//   ckpt_writer load --dir D [--rank R --world W]
//       loads the newest checkpoint as rank R of W, whatever world size saved it, and
//       checks every byte; prints "loaded step S from world size W".
#include <dl/ckpt.h>
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "core/sysio.h"

namespace {

using dl::ckpt::DType;
using dl::ckpt::Shape;
using Bytes = std::vector<std::uint8_t>;

struct Spec {
  std::string name;
  DType dtype;
  Shape shape;  // global; split by rows (dimension 0) when it has one
};

std::vector<Spec> specs(unsigned mib) {
  std::vector<Spec> s = {
      {"model/f16", DType::f16, {64, 33}},  {"model/bf16", DType::bf16, {64, 33}},
      {"model/f32", DType::f32, {64, 33}},  {"model/f64", DType::f64, {17}},
      {"model/i32", DType::i32, {5, 6, 7}}, {"step_count", DType::i64, {}},
      {"data/u8", DType::u8, {1000}},       {"empty", DType::f32, {0, 4}}};
  if (mib > 0) s.push_back({"model/big", DType::f32, {mib * 256ull, 1024}});
  return s;
}

std::uint64_t elements(const Shape& s) {
  std::uint64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// The global tensor's bytes at `step`.
Bytes contents(const Spec& spec, std::uint64_t step) {
  Bytes out(elements(spec.shape) * dl::ckpt::dtype_size(spec.dtype));
  std::uint64_t x = std::hash<std::string>{}(spec.name) ^ (step * 0x9e3779b97f4a7c15ull) ^ 1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out[i] = static_cast<std::uint8_t>(x >> 24);
  }
  return out;
}

dl::ckpt::Slice part_of(const Spec& spec, unsigned rank, unsigned world) {
  if (spec.shape.empty()) return {{}, {}};
  return dl::ckpt::even_split(spec.shape, 0, rank, world);
}

// The rows of `slice` of a row-major tensor (slices only ever cut dimension 0).
Bytes rows(const Spec& spec, const Bytes& global, const dl::ckpt::Slice& slice) {
  if (spec.shape.empty()) return global;
  const std::uint64_t row = global.size() / std::max<std::uint64_t>(spec.shape[0], 1);
  return Bytes(
      global.begin() + static_cast<std::ptrdiff_t>(slice.offset[0] * row),
      global.begin() + static_cast<std::ptrdiff_t>((slice.offset[0] + slice.shape[0]) * row));
}

Bytes rng_state(unsigned rank, std::uint64_t step) {
  Bytes b(64);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(rank * 31 + step + i);
  return b;
}

unsigned env_or(const char* name, unsigned fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? static_cast<unsigned>(std::stoul(v)) : fallback;
}

// Keeps the bytes a State points into alive.
struct Saved {
  std::vector<Bytes> parts;
  dl::ckpt::State state;
};

void fill(Saved& saved, const std::vector<Spec>& specs, std::uint64_t step, unsigned rank,
          unsigned world) {
  saved.parts.clear();
  saved.parts.reserve(specs.size());
  saved.state = {};
  saved.state.meta.step = step;
  saved.state.meta.epoch = step / 10;
  saved.state.meta.data_loader_position = step * 32;
  saved.state.meta.hyperparameters = R"({"lr": 0.001, "batch": 32})";
  saved.state.meta.metrics = {{"loss", 100.0 / static_cast<double>(step + 1)}};
  for (const Spec& spec : specs) {
    const dl::ckpt::Slice part = part_of(spec, rank, world);
    saved.parts.push_back(rows(spec, contents(spec, step), part));
    saved.state.tensors.push_back(
        {spec.name, spec.dtype, part.shape, saved.parts.back().data(), spec.shape, part.offset});
  }
  saved.state.rng_states["xorshift"] = rng_state(rank, step);
}

// The step loaded and checked, or nullopt (and a message) if there was none or it differs.
std::optional<std::uint64_t> load(const std::string& dir, unsigned rank, unsigned world,
                                  unsigned mib) {
  const std::vector<Spec> all = specs(mib);
  std::vector<Bytes> out;
  out.reserve(all.size());
  std::vector<dl::ckpt::Target> targets;
  for (const Spec& spec : all) {
    const dl::ckpt::Slice part = part_of(spec, rank, world);
    out.emplace_back(elements(part.shape) * dl::ckpt::dtype_size(spec.dtype));
    targets.push_back({spec.name, spec.dtype, part.shape, out.back().data(), part.offset});
  }
  const auto loaded = dl::ckpt::load_latest(dir, targets, rank);
  if (!loaded) {
    fmt::print(stderr, "ckpt_writer: no checkpoint in {}\n", dir);
    return std::nullopt;
  }
  const std::uint64_t step = loaded->meta.step;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (out[i] != rows(all[i], contents(all[i], step), part_of(all[i], rank, world))) {
      fmt::print(stderr, "ckpt_writer: tensor {} of step {} differs\n", all[i].name, step);
      return std::nullopt;
    }
  }
  if (rank < loaded->world_size && loaded->rng_states.at("xorshift") != rng_state(rank, step)) {
    fmt::print(stderr, "ckpt_writer: the RNG state of step {} differs\n", step);
    return std::nullopt;
  }
  fmt::print("loaded step {} from world size {}\n", step, loaded->world_size);
  std::fflush(stdout);  // the loop mode ends by SIGKILL, which flushes nothing
  return step;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"checkpoint integration test writer", "ckpt_writer"};
  app.require_subcommand(1);
  std::string dir, dump;
  std::uint64_t step = 1;
  unsigned mib = 0, keep = 0;
  unsigned rank = env_or("SLURM_PROCID", 0), world = env_or("SLURM_NTASKS", 1);
  for (CLI::App* cmd :
       {app.add_subcommand("save"), app.add_subcommand("loop"), app.add_subcommand("load")}) {
    cmd->add_option("--dir", dir)->required();
    cmd->add_option("--mib", mib);
    cmd->add_option("--rank", rank);
    cmd->add_option("--world", world);
  }
  app.get_subcommand("save")->add_option("--step", step);
  app.get_subcommand("save")->add_option("--dump", dump);
  for (const char* name : {"save", "loop"}) app.get_subcommand(name)->add_option("--keep", keep);
  CLI11_PARSE(app, argc, argv);

  try {
    if (app.got_subcommand("load")) return load(dir, rank, world, mib) ? 0 : 1;
    dl::ckpt::Options options;
    options.dir = dir;
    options.rank = rank;
    options.world_size = world;
    options.retention.keep_last = keep;
    dl::ckpt::Checkpointer ckpt(options);
    const std::vector<Spec> all = specs(mib);
    Saved saved;
    if (app.got_subcommand("save")) {
      fill(saved, all, step, rank, world);
      fmt::print("saved {}\n", ckpt.save(saved.state));
      if (!dump.empty()) {
        dl::sys::make_dirs(dump);
        for (const Spec& spec : all) {
          std::string file = spec.name;
          for (char& c : file) c = c == '/' ? '_' : c;
          const Bytes bytes = contents(spec, step);
          dl::sys::write_file_durably(dl::sys::join(dump, file + ".bin"),
                                      std::string(bytes.begin(), bytes.end()));
        }
      }
      return 0;
    }
    if (dl::ckpt::latest_valid(dir)) {
      const auto resumed = load(dir, rank, world, mib);
      if (!resumed) return 1;
      step = *resumed + 1;
    }
    for (;; ++step) {
      fill(saved, all, step, rank, world);  // "training": save_async copied the last state
      ckpt.save_async(saved.state);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "ckpt_writer: {}\n", e.what());
    return 1;
  }
}
