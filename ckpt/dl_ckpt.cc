// dl-ckpt: list, show, verify, prune and export checkpoints. See man/dl-ckpt.1.
//
// Exit status: 0 success; 1 a checkpoint is corrupt or unusable; 2 bad usage or a path
// that is not a checkpoint; 3 a system error (I/O, permissions, no space).
#include <dl/ckpt.h>
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "ckpt/names.h"
#include "ckpt/store.h"
#include "core/cli.h"
#include "core/error.h"
#include "core/log.h"
#include "core/sysio.h"

namespace dl::ckpt {
namespace {

using nlohmann::json;

enum Exit { kOk = 0, kCorrupt = 1, kUsage = 2, kSystem = 3 };

// A path given on the command line that is not what the command needs.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string human_bytes(std::uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", n) : fmt::format("{:.1f} {}", v, units[u]);
}

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

std::uint64_t tensor_bytes(const TensorInfo& t) {
  std::uint64_t n = dtype_size(t.dtype);
  for (std::uint64_t d : t.shape) n *= d;
  return n;
}

json metrics_json(const std::map<std::string, double>& metrics) {
  json j = json::object();
  for (const auto& [k, v] : metrics) j[k] = v;
  return j;
}

std::string metrics_text(const std::map<std::string, double>& metrics) {
  std::string out;
  for (const auto& [k, v] : metrics) out += fmt::format("{}{}={:g}", out.empty() ? "" : " ", k, v);
  return out.empty() ? "-" : out;
}

bool has_step_dirs(const std::string& dir) {
  for (const std::string& name : sys::list_dir(dir)) {
    if (parse_step_dir_name(name) || name == kLatestName) return true;
  }
  return false;
}

// What a path names: a step directory (it has a manifest) or a checkpoint directory.
enum class PathKind { step, root };

PathKind classify(const std::string& path) {
  switch (sys::file_type(path)) {
    case sys::FileType::missing:
      throw UsageError(fmt::format("{}: no such file or directory", path));
    case sys::FileType::directory: break;
    default:
      throw UsageError(fmt::format(
          "{}: not a checkpoint: give a checkpoint directory or one of its step-NNNNNNNNN "
          "directories, not a file",
          path));
  }
  if (sys::file_type(sys::join(path, kManifestName)) == sys::FileType::file) return PathKind::step;
  if (has_step_dirs(path)) return PathKind::root;
  throw UsageError(fmt::format("{}: not a checkpoint: no {} and no step-NNNNNNNNN directories",
                               path, kManifestName));
}

void print_json(const json& j) { fmt::print("{}\n", j.dump(2)); }

// null for a checkpoint written before manifests recorded their writer.
json writer_json(const std::optional<Writer>& w) {
  if (!w) return nullptr;
  json j = {{"job", w->job_key()}, {"job_id", w->job_id}, {"user", w->user}, {"uid", w->uid}};
  if (!w->array_job_id.empty()) {
    j["array_job_id"] = w->array_job_id;
    j["array_task_id"] = w->array_task_id;
  }
  return j;
}

// "4711 alice", "100_3 alice", "-" when unknown.
std::string writer_text(const std::optional<Writer>& w) {
  if (!w) return "-";
  const std::string job = w->job_key().empty() ? std::string("-") : w->job_key();
  return fmt::format("{} {}", job, w->user.empty() ? std::to_string(w->uid) : w->user);
}

json info_json(const CheckpointInfo& c) {
  json j = {{"step", c.step}, {"path", c.path}, {"valid", c.valid}, {"latest", c.latest}};
  if (!c.valid) j["problem"] = c.problem;
  if (c.world_size > 0) {
    j["world_size"] = c.world_size;
    j["created"] = format_utc(c.created_unix);
    j["created_unix"] = c.created_unix;
    j["bytes"] = c.bytes;
    j["tensors"] = c.tensors;
    j["epoch"] = c.meta.epoch;
    j["metrics"] = metrics_json(c.meta.metrics);
    j["writer"] = writer_json(c.writer);
  }
  return j;
}

int cmd_ls(const std::string& dir, Verify level, bool as_json) {
  if (classify(dir) != PathKind::root) {
    throw UsageError(
        fmt::format("{}: a step directory; ls lists a checkpoint directory (its parent)", dir));
  }
  const std::vector<CheckpointInfo> list = list_checkpoints(dir, level);
  if (as_json) {
    json j = {{"dir", dir}, {"checkpoints", json::array()}};
    for (const CheckpointInfo& c : list) j["checkpoints"].push_back(info_json(c));
    print_json(j);
    return kOk;
  }
  fmt::print("{:<16} {:<7} {:>6} {:>10} {:>8} {:<21} {:<20} {}\n", "STEP", "STATUS", "WORLD",
             "SIZE", "TENSORS", "CREATED", "WRITER", "METRICS");
  for (const CheckpointInfo& c : list) {
    fmt::print("{:<16} {:<7} {:>6} {:>10} {:>8} {:<21} {:<20} {}\n",
               step_dir_name(c.step) + (c.latest ? "*" : ""), c.valid ? "ok" : "BAD",
               c.world_size > 0 ? fmt::format("{}", c.world_size) : "-",
               c.world_size > 0 ? human_bytes(c.bytes) : "-",
               c.world_size > 0 ? fmt::format("{}", c.tensors) : "-",
               c.world_size > 0 ? format_utc(c.created_unix) : "-", writer_text(c.writer),
               metrics_text(c.meta.metrics));
  }
  for (const CheckpointInfo& c : list) {
    if (!c.valid) fmt::print("{}: {}\n", step_dir_name(c.step), c.problem);
  }
  if (list.empty()) fmt::print("(no checkpoints)\n");
  return kOk;
}

// The step directory a path means: itself, or the newest valid checkpoint of a root.
std::string resolve_step(const std::string& path) {
  if (classify(path) == PathKind::step) return path;
  const std::optional<std::string> newest = latest_valid(path, Verify::metadata);
  if (!newest) throw CorruptError(fmt::format("{}: no valid checkpoint", path));
  return *newest;
}

int cmd_show(const std::string& path, bool as_json) {
  const Reader r = Reader::open(resolve_step(path), Verify::metadata);
  const Manifest m = read_manifest(r.path());
  const Metadata& meta = r.metadata();
  const std::vector<TensorInfo> tensors = r.tensors();
  if (as_json) {
    json j = {{"path", r.path()},
              {"step", meta.step},
              {"epoch", meta.epoch},
              {"data_loader_position", meta.data_loader_position},
              {"world_size", r.world_size()},
              {"created", format_utc(r.created_unix())},
              {"created_unix", r.created_unix()},
              {"host", r.host()},
              {"writer", writer_json(r.writer())},
              {"bytes", r.bytes()},
              {"hyperparameters", json::parse(meta.hyperparameters)},
              {"user_metadata", json::parse(meta.user_metadata)},
              {"metrics", metrics_json(meta.metrics)},
              {"tensors", json::array()},
              {"shards", json::array()}};
    for (const TensorInfo& t : tensors) {
      j["tensors"].push_back({{"name", t.name},
                              {"dtype", dtype_name(t.dtype)},
                              {"shape", t.shape},
                              {"bytes", tensor_bytes(t)},
                              {"ranks", t.ranks}});
    }
    for (const ShardEntry& s : m.shards) {
      json rng = json::array();
      for (const BlobEntry& b : s.rng) rng.push_back({{"name", b.name}, {"bytes", b.bytes}});
      j["shards"].push_back(
          {{"rank", s.rank}, {"file", s.file}, {"bytes", s.bytes}, {"host", s.host}, {"rng", rng}});
    }
    print_json(j);
    return kOk;
  }
  fmt::print("checkpoint   {}\n", r.path());
  fmt::print("step         {}\nepoch        {}\nloader pos.  {}\n", meta.step, meta.epoch,
             meta.data_loader_position);
  fmt::print("world size   {}\ncreated      {} on {}\nsize         {}\n", r.world_size(),
             format_utc(r.created_unix()), r.host(), human_bytes(r.bytes()));
  fmt::print("written by   {}\n", describe_writer(r.writer()));
  fmt::print("metrics      {}\nhyperparams  {}\nuser meta    {}\n", metrics_text(meta.metrics),
             meta.hyperparameters, meta.user_metadata);
  fmt::print("\n{:<48} {:<5} {:<24} {:>10} {}\n", "TENSOR", "DTYPE", "SHAPE", "SIZE", "RANKS");
  for (const TensorInfo& t : tensors) {
    fmt::print("{:<48} {:<5} {:<24} {:>10} {}\n", t.name, dtype_name(t.dtype), shape_str(t.shape),
               human_bytes(tensor_bytes(t)),
               t.ranks.size() == r.world_size() ? std::string("all")
                                                : fmt::format("{}", fmt::join(t.ranks, ",")));
  }
  fmt::print("\n{:<6} {:<28} {:>10} {:<20} {}\n", "RANK", "FILE", "SIZE", "HOST", "RNG STATES");
  for (const ShardEntry& s : m.shards) {
    std::vector<std::string> names;
    for (const BlobEntry& b : s.rng) names.push_back(b.name);
    fmt::print("{:<6} {:<28} {:>10} {:<20} {}\n", s.rank, s.file, human_bytes(s.bytes), s.host,
               names.empty() ? "-" : fmt::format("{}", fmt::join(names, ",")));
  }
  return kOk;
}

int cmd_verify(const std::string& path, bool as_json) {
  std::vector<CheckpointInfo> results;
  if (classify(path) == PathKind::step) {
    CheckpointInfo c;
    c.path = path;
    try {
      const Reader r = Reader::open(path, Verify::full);
      c.step = r.metadata().step;
      c.valid = true;
    } catch (const CorruptError& e) {
      c.problem = e.what();
    } catch (const SystemError& e) {
      c.problem = e.what();  // an unreadable checkpoint is not a valid one
    }
    results.push_back(std::move(c));
  } else {
    results = list_checkpoints(path, Verify::full);
  }
  std::size_t bad = 0;
  for (const CheckpointInfo& c : results) bad += c.valid ? 0 : 1;
  if (as_json) {
    json j = {{"checkpoints", json::array()}, {"valid", results.size() - bad}, {"invalid", bad}};
    for (const CheckpointInfo& c : results) {
      json e = {{"path", c.path}, {"valid", c.valid}};
      if (c.valid) e["step"] = c.step;
      if (!c.valid) e["problem"] = c.problem;
      j["checkpoints"].push_back(e);
    }
    print_json(j);
  } else {
    for (const CheckpointInfo& c : results) {
      if (c.valid) {
        fmt::print("ok    {}\n", c.path);
      } else {
        fmt::print("BAD   {}: {}\n", c.path, c.problem);
      }
    }
    fmt::print("{} valid, {} invalid\n", results.size() - bad, bad);
  }
  return bad == 0 ? kOk : kCorrupt;
}

int cmd_prune(const std::string& dir, const Retention& policy, bool dry_run, bool as_json) {
  if (classify(dir) != PathKind::root) {
    throw UsageError(
        fmt::format("{}: a step directory; prune works on a checkpoint directory", dir));
  }
  if (policy.keep_last == 0) throw UsageError("--keep must be at least 1");
  const std::vector<std::string> removed = prune(dir, policy, dry_run);
  if (as_json) {
    print_json({{"dir", dir}, {"dry_run", dry_run}, {"removed", removed}});
  } else {
    for (const std::string& p : removed) {
      fmt::print("{} {}\n", dry_run ? "would remove" : "removed", p);
    }
    if (removed.empty()) fmt::print("nothing to remove\n");
  }
  return kOk;
}

int cmd_export(const std::string& path, const std::string& out, bool as_json) {
  const std::string step_dir = resolve_step(path);
  export_hdf5(step_dir, out);
  const std::uint64_t bytes = sys::file_size(out);
  if (as_json) {
    print_json({{"source", step_dir}, {"output", out}, {"bytes", bytes}});
  } else {
    fmt::print("exported {} to {} ({})\n", step_dir, out, human_bytes(bytes));
  }
  return kOk;
}

int run(int argc, char** argv) {
  CLI::App app{"List, show, verify, prune and export slurm-dl checkpoints.", "dl-ckpt"};
  app.require_subcommand(1);
  add_standard_flags(app, "dl-ckpt");
  bool as_json = false;
  std::string path;

  CLI::App* ls = app.add_subcommand("ls", "list the checkpoints of a directory");
  ls->add_option("DIR", path, "checkpoint directory")->required();
  std::string level_name = "metadata";
  ls->add_option("--check", level_name, "how much to verify: quick, metadata (default) or full")
      ->check(CLI::IsMember({"quick", "metadata", "full"}));
  ls->add_flag("--json", as_json, "print JSON");

  CLI::App* show = app.add_subcommand("show", "show a checkpoint's metadata, tensors and shards");
  show->add_option("PATH", path, "step directory, or checkpoint directory (its newest valid one)")
      ->required();
  show->add_flag("--json", as_json, "print JSON");

  CLI::App* verify =
      app.add_subcommand("verify", "verify every checksum of one or all checkpoints");
  verify->add_option("PATH", path, "step directory, or checkpoint directory (all of them)")
      ->required();
  verify->add_flag("--json", as_json, "print JSON");

  CLI::App* prune_cmd =
      app.add_subcommand("prune", "remove checkpoints a retention policy does not keep");
  Retention policy;
  bool dry_run = false;
  bool higher = false;
  prune_cmd->add_option("DIR", path, "checkpoint directory")->required();
  prune_cmd->add_option("--keep", policy.keep_last, "keep the N newest valid checkpoints")
      ->required();
  prune_cmd->add_option("--keep-best", policy.keep_best, "also keep the K best by --metric");
  prune_cmd->add_option("--metric", policy.metric,
                        "metric ranking the best checkpoints (lowest first)");
  prune_cmd->add_flag("--max", higher, "the highest --metric is best");
  prune_cmd->add_flag("--dry-run", dry_run, "only print what would be removed");
  prune_cmd->add_flag("--json", as_json, "print JSON");

  CLI::App* export_cmd =
      app.add_subcommand("export", "write a checkpoint as one HDF5 file with whole tensors");
  std::string out;
  export_cmd
      ->add_option("PATH", path, "step directory, or checkpoint directory (its newest valid one)")
      ->required();
  export_cmd->add_option("-o,--output", out, "the HDF5 file to write")->required();
  export_cmd->add_flag("--json", as_json, "print JSON");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kOk : kUsage;
  }

  set_log_sink([](LogLevel level, std::string_view msg) {
    if (level <= LogLevel::warning) {
      fmt::print(stderr, "dl-ckpt: {}: {}\n", level == LogLevel::error ? "error" : "warning", msg);
    }
  });
  try {
    if (*ls) {
      const Verify level = level_name == "quick"  ? Verify::quick
                           : level_name == "full" ? Verify::full
                                                  : Verify::metadata;
      return cmd_ls(path, level, as_json);
    }
    if (*show) return cmd_show(path, as_json);
    if (*verify) return cmd_verify(path, as_json);
    if (*prune_cmd) {
      policy.higher_is_better = higher;
      return cmd_prune(path, policy, dry_run, as_json);
    }
    return cmd_export(path, out, as_json);
  } catch (const UsageError& e) {
    fmt::print(stderr, "dl-ckpt: {}\n", e.what());
    return kUsage;
  } catch (const InputError& e) {
    fmt::print(stderr, "dl-ckpt: {}\n", e.what());
    return kUsage;
  } catch (const CorruptError& e) {
    fmt::print(stderr, "dl-ckpt: {}\n", e.what());
    return kCorrupt;
  } catch (const SystemError& e) {
    fmt::print(stderr, "dl-ckpt: {}\n", e.what());
    return kSystem;
  }
}

}  // namespace
}  // namespace dl::ckpt

int main(int argc, char** argv) { return dl::ckpt::run(argc, argv); }
