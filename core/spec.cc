#include "core/spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "config.h"
#include "core/error.h"
#include "core/parse.h"

namespace dl {
namespace {

using std::chrono::seconds;

constexpr seconds kDay{86400};
constexpr const char* kSpecVersion = "1";

// Where a value came from: "--dl-gpus" for an option, "DL_GPUS" for a variable.
struct Source {
  std::string label;
  std::string value;
};

const OptionInfo* find_option(std::string_view name) {
  for (const auto& o : option_infos()) {
    if (name == o.name) return &o;
  }
  return nullptr;
}

bool parse_bool(const Source& s) {
  std::string v = s.value;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  if (v == "1" || v == "yes" || v == "true") return true;
  if (v == "0" || v == "no" || v == "false") return false;
  throw InputError(fmt::format("{}={}: expected 1/yes/true or 0/no/false", s.label, s.value));
}

Placement parse_placement(const Source& s) {
  if (s.value == "pack") return Placement::pack;
  if (s.value == "spread") return Placement::spread;
  if (s.value == "switch") return Placement::leaf_switch;
  if (s.value == "even") return Placement::even;
  throw InputError(
      fmt::format("{}={}: expected one of pack, spread, switch, even", s.label, s.value));
}

std::string parse_label(const Source& s) {
  // Labels name directories (the experiment's, the trial's journals): no leading '.'.
  const bool ok = !s.value.empty() && s.value.size() <= 64 && s.value[0] != '.' &&
                  std::all_of(s.value.begin(), s.value.end(), [](unsigned char c) {
                    return std::isalnum(c) || c == '.' || c == '_' || c == '-';
                  });
  if (!ok) {
    throw InputError(fmt::format(
        "{}={}: expected 1 to 64 letters, digits, '.', '_' or '-', not starting with '.'", s.label,
        s.value));
  }
  return s.value;
}

Elastic parse_elastic(const Source& s, std::uint32_t max_gpus) {
  const auto colon = s.value.find(':');
  const auto fail = [&] {
    return InputError(
        fmt::format("{}={}: expected MIN:MAX, two whole numbers from 1 to {} "
                    "with MIN <= MAX",
                    s.label, s.value, max_gpus));
  };
  if (colon == std::string::npos) throw fail();
  Elastic e;
  try {
    e.min = static_cast<std::uint32_t>(
        parse_uint(s.label, std::string_view(s.value).substr(0, colon), 1, max_gpus));
    e.max = static_cast<std::uint32_t>(
        parse_uint(s.label, std::string_view(s.value).substr(colon + 1), 1, max_gpus));
  } catch (const InputError&) {
    throw fail();
  }
  if (e.min > e.max) throw fail();
  return e;
}

std::string parse_ckpt_dir(const Source& s) {
  const std::string& p = s.value;
  const auto fail = [&](const char* why) {
    return InputError(fmt::format("{}={}: {}", s.label, p, why));
  };
  if (p.empty() || p.front() != '/') throw fail("expected an absolute path");
  if (p.size() >= 4096) throw fail("path too long (at most 4095 bytes)");
  for (const unsigned char c : p) {
    if (c < 0x20 || c == 0x7f) throw fail("control characters are not allowed in the path");
  }
  std::string normal;
  for (const auto part : path_components(p)) {
    if (part == "." || part == "..") throw fail("'.' and '..' are not allowed in the path");
    normal += '/';
    normal += part;
  }
  if (normal.empty()) throw fail("the root directory cannot be a checkpoint directory");
  return normal;
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += sep;
    out += item;
  }
  return out;
}

}  // namespace

std::string_view to_string(Placement p) {
  switch (p) {
    case Placement::pack: return "pack";
    case Placement::spread: return "spread";
    case Placement::leaf_switch: return "switch";
    case Placement::even: return "even";
  }
  return "pack";
}

const std::vector<OptionInfo>& option_infos() {
  static const std::vector<OptionInfo> infos = {
      {"dl-gpus", "N", "GPUs for the whole gang: all start together or none", "DL_GPUS"},
      {"dl-placement", "pack|spread|switch|even",
       "pack: fewest nodes (default); spread: across nodes; switch: under one leaf switch; "
       "even: split evenly over nodes shared with other jobs",
       "DL_PLACEMENT"},
      {"dl-ckpt-dir", "PATH", "checkpoint directory (default <root>/<user>/<job id>)",
       "DL_CKPT_DIR"},
      {"dl-ckpt-every", "DURATION", "periodic checkpoint interval, e.g. 90s, 30m, 2h",
       "DL_CKPT_EVERY"},
      {"dl-ckpt-keep", "N", "checkpoints to keep (default 3)", "DL_CKPT_KEEP"},
      {"dl-preemptible", nullptr,
       "may be preempted or stopped at its deadline: checkpoints and is requeued",
       "DL_PREEMPTIBLE"},
      {"dl-grace", "DURATION", "time needed to write a checkpoint", "DL_GRACE"},
      {"dl-max-restarts", "N", "restarts after failures (default 3)", "DL_MAX_RESTARTS"},
      {"dl-elastic", "MIN:MAX", "acceptable range of GPUs", "DL_ELASTIC"},
      {"dl-experiment", "NAME", "experiment name for tracking", "DL_EXPERIMENT"},
      {"dl-trial", "ID", "trial id for tracking", "DL_TRIAL"},
      {"dl-resume-from", "PATH|JOBID",
       "continue another job's run: resume its newest checkpoint (a job id, or a checkpoint "
       "directory) while this job has none of its own",
       "DL_CKPT_RESUME_FROM"},
      {"dl-watchdog", "DURATION",
       "declare the job hung after this long without progress "
       "(0 = off)",
       "DL_WATCHDOG"},
  };
  return infos;
}

std::string option_usage(const OptionInfo& o, const SiteConfig& site) {
  if (std::string_view(o.name) == "dl-grace") {
    return fmt::format("{} (default {}s)", o.help, site.default_grace.count());
  }
  return o.help;
}

std::vector<std::string> SiteConfig::effective_ckpt_roots() const {
  if (!allowed_ckpt_roots.empty()) return allowed_ckpt_roots;
  return {default_ckpt_root, "~"};
}

SiteConfig parse_site_config(const std::vector<std::string>& args) {
  SiteConfig site;
  for (const auto& arg : args) {
    const auto eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    if (eq == std::string::npos) {
      throw InputError(fmt::format("plugstack argument '{}': expected key=value", arg));
    }
    const Source s{key, arg.substr(eq + 1)};
    if (key == "default_ckpt_root") {
      site.default_ckpt_root = parse_ckpt_dir(s);
    } else if (key == "allowed_ckpt_roots") {
      site.allowed_ckpt_roots.clear();
      std::size_t start = 0;
      while (start <= s.value.size()) {
        const auto comma = std::min(s.value.find(',', start), s.value.size());
        const std::string root = s.value.substr(start, comma - start);
        site.allowed_ckpt_roots.push_back(root == "~" ? root : parse_ckpt_dir({key, root}));
        start = comma + 1;
      }
    } else if (key == "max_gpus") {
      site.max_gpus = static_cast<std::uint32_t>(parse_uint(key, s.value, 1, 1u << 20));
    } else if (key == "default_grace") {
      site.default_grace = parse_duration(key, s.value, seconds(1), kDay);
    } else if (key == "shared_ckpt_root") {
      if (s.value == "auto") {
        site.shared_ckpt_root.reset();
      } else {
        try {
          site.shared_ckpt_root = parse_bool(s);
        } catch (const InputError&) {
          throw InputError(fmt::format("plugstack argument '{}': expected yes, no or auto", arg));
        }
      }
    } else if (key == "drain_after") {
      site.drain_after = static_cast<std::uint32_t>(parse_uint(key, s.value, 0, 16));
    } else if (key == "drain_state_dir") {
      site.drain_state_dir = parse_ckpt_dir(s);
    } else if (key == "down_failed_batch_host") {
      site.down_failed_batch_host = parse_bool(s);
    } else if (key == "gpu_metrics") {
      if (s.value == "off") {
        site.gpu_metrics_dir.clear();
      } else if (s.value.empty() || s.value[0] != '/') {
        throw InputError(fmt::format("{}={}: expected off or an absolute path", key, s.value));
      } else {
        site.gpu_metrics_dir = parse_ckpt_dir(s);
      }
    } else if (key == "slurm_bindir") {
      site.slurm_bindir = parse_ckpt_dir(s);
    } else {
      throw InputError(
          fmt::format("plugstack argument '{}': unknown key '{}' (expected default_ckpt_root, "
                      "allowed_ckpt_roots, max_gpus, default_grace, shared_ckpt_root, drain_after, "
                      "drain_state_dir, down_failed_batch_host, gpu_metrics or slurm_bindir)",
                      arg, key));
    }
  }
  return site;
}

std::string SiteConfig::default_slurm_bindir() { return DL_SLURM_BINDIR; }

std::string slurm_tool_path(const SiteConfig& site, std::string_view tool) {
  return site.slurm_bindir + "/" + std::string(tool);
}

bool spec_requested(const RawOptions& raw, const EnvLookup& env) {
  if (!raw.empty() || env(kSpecMarker)) return true;
  for (const auto& o : option_infos()) {
    if (env(o.env)) return true;
  }
  return false;
}

std::optional<Spec> make_spec(const RawOptions& raw, const EnvLookup& env, const SiteConfig& site,
                              std::string_view home) {
  for (const auto& [name, value] : raw) {
    if (!find_option(name)) throw InputError(fmt::format("--{}: not a slurm-dl option", name));
  }
  if (!spec_requested(raw, env)) return std::nullopt;
  // The value of each option: the command line wins over the DL_* variable.
  std::map<std::string, Source> given;
  for (const auto& o : option_infos()) {
    if (const auto it = raw.find(o.name); it != raw.end()) {
      given[o.name] = Source{fmt::format("--{}", o.name), it->second};
    } else if (auto v = env(o.env)) {
      given[o.name] = Source{o.env, *v};
    }
  }

  Spec spec;
  spec.grace = site.default_grace;
  const auto with = [&](const char* name, auto&& apply) {
    if (const auto it = given.find(name); it != given.end()) apply(it->second);
  };
  with("dl-gpus", [&](const Source& s) {
    spec.gpus = static_cast<std::uint32_t>(parse_uint(s.label, s.value, 1, site.max_gpus));
  });
  with("dl-placement", [&](const Source& s) { spec.placement = parse_placement(s); });
  with("dl-ckpt-dir", [&](const Source& s) {
    spec.ckpt_dir = parse_ckpt_dir(s);
    if (!ckpt_dir_allowed(site, spec.ckpt_dir, home)) {
      std::vector<std::string> roots;
      for (const auto& r : site.effective_ckpt_roots()) {
        roots.push_back(r == "~" ? std::string(home) : r);
      }
      throw InputError(fmt::format("{}={}: not under an allowed checkpoint root ({})", s.label,
                                   s.value, join(roots, ", ")));
    }
  });
  with("dl-ckpt-every", [&](const Source& s) {
    spec.ckpt_every = parse_duration(s.label, s.value, seconds(1), 30 * kDay);
  });
  with("dl-ckpt-keep", [&](const Source& s) {
    spec.ckpt_keep = static_cast<std::uint32_t>(parse_uint(s.label, s.value, 1, 1000));
  });
  with("dl-preemptible", [&](const Source& s) {
    // The flag itself carries no value; the variable says yes or no.
    spec.preemptible = s.label.rfind("--", 0) == 0 ? true : parse_bool(s);
  });
  with("dl-grace",
       [&](const Source& s) { spec.grace = parse_duration(s.label, s.value, seconds(1), kDay); });
  with("dl-max-restarts", [&](const Source& s) {
    spec.max_restarts = static_cast<std::uint32_t>(parse_uint(s.label, s.value, 0, 1000));
  });
  with("dl-elastic", [&](const Source& s) { spec.elastic = parse_elastic(s, site.max_gpus); });
  with("dl-experiment", [&](const Source& s) { spec.experiment = parse_label(s); });
  with("dl-trial", [&](const Source& s) { spec.trial = parse_label(s); });
  with("dl-resume-from", [&](const Source& s) {
    if (is_ckpt_job_key(s.value)) {
      spec.resume_from = s.value;
      return;
    }
    if (s.value.empty() || s.value.front() != '/') {
      throw InputError(fmt::format(
          "{}={}: expected a job id (e.g. 4711 or 4700_3) or an absolute checkpoint directory",
          s.label, s.value));
    }
    spec.resume_from = parse_ckpt_dir(s);
    if (!ckpt_dir_allowed(site, spec.resume_from, home)) {
      std::vector<std::string> roots;
      for (const auto& r : site.effective_ckpt_roots()) {
        roots.push_back(r == "~" ? std::string(home) : r);
      }
      throw InputError(fmt::format("{}={}: not under an allowed checkpoint root ({})", s.label,
                                   s.value, join(roots, ", ")));
    }
  });
  with("dl-watchdog", [&](const Source& s) {
    spec.watchdog = parse_duration(s.label, s.value, seconds(0), 30 * kDay);
  });

  if (spec.elastic) {
    if (!spec.gpus) {
      spec.gpus = spec.elastic->max;
    } else if (*spec.gpus < spec.elastic->min || *spec.gpus > spec.elastic->max) {
      const Source& g = given.at("dl-gpus");
      const Source& e = given.at("dl-elastic");
      throw InputError(
          fmt::format("{}={}: outside the range {}={}", g.label, g.value, e.label, e.value));
    }
  }
  return spec;
}

std::vector<std::pair<std::string, std::string>> Spec::to_env() const {
  std::vector<std::pair<std::string, std::string>> env;
  env.emplace_back(kSpecMarker, kSpecVersion);
  if (gpus) env.emplace_back("DL_GPUS", std::to_string(*gpus));
  env.emplace_back("DL_PLACEMENT", std::string(to_string(placement)));
  if (!ckpt_dir.empty()) env.emplace_back("DL_CKPT_DIR", ckpt_dir);
  if (ckpt_every) env.emplace_back("DL_CKPT_EVERY", std::to_string(ckpt_every->count()));
  env.emplace_back("DL_CKPT_KEEP", std::to_string(ckpt_keep));
  env.emplace_back("DL_PREEMPTIBLE", preemptible ? "1" : "0");
  env.emplace_back("DL_GRACE", std::to_string(grace.count()));
  env.emplace_back("DL_MAX_RESTARTS", std::to_string(max_restarts));
  if (elastic) env.emplace_back("DL_ELASTIC", fmt::format("{}:{}", elastic->min, elastic->max));
  if (!experiment.empty()) env.emplace_back("DL_EXPERIMENT", experiment);
  if (!trial.empty()) env.emplace_back("DL_TRIAL", trial);
  env.emplace_back("DL_WATCHDOG", std::to_string(watchdog.count()));
  if (!resume_from.empty()) env.emplace_back("DL_CKPT_RESUME_FROM", resume_from);
  return env;
}

std::optional<Spec> spec_from_env(const EnvLookup& env) {
  if (!env(kSpecMarker)) return std::nullopt;
  if (*env(kSpecMarker) != kSpecVersion) {
    throw InputError(fmt::format("{}={}: this slurm-dl reads version {}", kSpecMarker,
                                 *env(kSpecMarker), kSpecVersion));
  }
  // The variables were written by to_env(), so the submit-time checks apply as they are;
  // the roots check already happened at submit time with the user's home.
  SiteConfig any_site;
  any_site.max_gpus = 1u << 20;
  any_site.allowed_ckpt_roots = {"/"};
  return make_spec({}, env, any_site, "/");
}

std::string ckpt_job_key(std::uint32_t job_id, std::optional<std::uint32_t> array_job_id,
                         std::optional<std::uint32_t> array_task_id) {
  if (array_job_id && array_task_id) return fmt::format("{}_{}", *array_job_id, *array_task_id);
  return std::to_string(job_id);
}

bool is_ckpt_job_key(std::string_view s) {
  const auto digits = [](std::string_view d) {
    return !d.empty() && d.size() <= 10 &&
           std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  const auto underscore = s.find('_');
  if (underscore == std::string_view::npos) return digits(s);
  return digits(s.substr(0, underscore)) && digits(s.substr(underscore + 1));
}

std::string resolve_resume_from(const SiteConfig& site, std::string_view user,
                                std::string_view value) {
  if (is_ckpt_job_key(value)) return default_ckpt_dir(site, user, value);
  return std::string(value);
}

FsKind classify_fs_type(std::uint64_t f_type) {
  struct Known {
    std::uint64_t magic;
    const char* name;
    FsSharing sharing;
  };
  // From linux/magic.h and the file systems' own sources (not all have a header).
  static constexpr Known kKnown[] = {
      {0x6969, "nfs", FsSharing::shared},        {0x0BD00BD0, "lustre", FsSharing::shared},
      {0x47504653, "gpfs", FsSharing::shared},   {0x19830326, "beegfs", FsSharing::shared},
      {0x00C36400, "cephfs", FsSharing::shared}, {0xFF534D42, "cifs", FsSharing::shared},
      {0xFE534D42, "smb2", FsSharing::shared},   {0x65735546, "fuse", FsSharing::unknown},
      {0x013111A8, "ibrix", FsSharing::shared},  {0x5346414F, "afs", FsSharing::shared},
      {0x6B414653, "afs", FsSharing::shared},    {0x7461636f, "ocfs2", FsSharing::shared},
      {0x01161970, "gfs2", FsSharing::shared},   {0xEF53, "ext4", FsSharing::local},
      {0x58465342, "xfs", FsSharing::local},     {0x9123683E, "btrfs", FsSharing::local},
      {0x01021994, "tmpfs", FsSharing::local},   {0x794C7630, "overlayfs", FsSharing::local},
      {0x2FC12FC1, "zfs", FsSharing::local},     {0xF2F52010, "f2fs", FsSharing::local},
      {0x858458f6, "ramfs", FsSharing::local},
  };
  for (const Known& k : kKnown) {
    if (k.magic == f_type) return {k.name, k.sharing};
  }
  return {fmt::format("0x{:x}", f_type), FsSharing::unknown};
}

std::string default_ckpt_dir(const SiteConfig& site, std::string_view user,
                             std::string_view job_name) {
  std::string safe;
  for (const unsigned char c : job_name) {
    safe += (std::isalnum(c) || c == '.' || c == '_' || c == '-') ? static_cast<char>(c) : '_';
  }
  if (safe.empty() || safe == "." || safe == "..") safe = "job";
  return fmt::format("{}/{}/{}", site.default_ckpt_root, user, safe);
}

bool ckpt_dir_allowed(const SiteConfig& site, std::string_view dir, std::string_view home) {
  const auto d = path_components(dir);
  for (const auto& root : site.effective_ckpt_roots()) {
    const std::string r = root == "~" ? std::string(home) : root;
    const auto rc = path_components(r);
    if (rc.size() <= d.size() && std::equal(rc.begin(), rc.end(), d.begin())) return true;
  }
  return false;
}

void check_against_request(const Spec& spec, const NativeRequest& request) {
  if (request.time_limit && spec.grace >= *request.time_limit) {
    throw InputError(fmt::format("--dl-grace={}: must be shorter than the time limit ({})",
                                 format_duration(spec.grace),
                                 format_duration(*request.time_limit)));
  }
  if (spec.gpus && request.gpus && *spec.gpus != *request.gpus) {
    throw InputError(
        fmt::format("--dl-gpus={}: contradicts the {} GPUs asked with --gpus/--gres=gpu; give only "
                    "--dl-gpus",
                    *spec.gpus, *request.gpus));
  }
}

}  // namespace dl
