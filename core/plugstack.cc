#include "core/plugstack.h"

#include <fmt/format.h>
#include <glob.h>
#include <unistd.h>

#include <sstream>

#include "core/error.h"
#include "core/spec.h"
#include "core/sysio.h"

namespace dl {

PlugstackScan scan_plugstack(std::string_view text, std::string_view plugin_name) {
  PlugstackScan scan;
  std::istringstream in{std::string(text)};
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::string first;
    if (!(words >> first)) continue;
    if (first == "include") {
      std::string pattern;
      if (words >> pattern) scan.includes.push_back(pattern);
      continue;
    }
    if (first != "required" && first != "optional") continue;
    std::string plugin;
    if (!(words >> plugin)) continue;
    const auto slash = plugin.rfind('/');
    const std::string base = slash == std::string::npos ? plugin : plugin.substr(slash + 1);
    if (base != plugin_name || scan.dl_args) continue;
    std::vector<std::string> args;
    for (std::string arg; words >> arg;) args.push_back(arg);
    scan.dl_args = std::move(args);
    scan.dl_line = number;
    scan.dl_kind = first;
    scan.dl_plugin = plugin;
  }
  return scan;
}

std::optional<PlugstackLine> find_plugstack_line(const std::string& path,
                                                 std::string_view plugin_name,
                                                 const ReadText& read) {
  std::vector<std::string> files{path};
  // A bound against include loops.
  for (std::size_t i = 0; i < files.size() && i < 256; ++i) {
    const std::optional<std::string> text = read(files[i]);
    if (!text) continue;
    PlugstackScan scan = scan_plugstack(*text, plugin_name);
    if (scan.dl_args) {
      return PlugstackLine{files[i], scan.dl_line, scan.dl_kind, scan.dl_plugin,
                           std::move(*scan.dl_args)};
    }
    for (const auto& pattern : scan.includes) {
      glob_t g{};
      if (glob(pattern.c_str(), 0, nullptr, &g) == 0) {
        for (std::size_t k = 0; k < g.gl_pathc; ++k) files.emplace_back(g.gl_pathv[k]);
      }
      globfree(&g);
    }
  }
  return std::nullopt;
}

namespace {

// plugstack.conf and the files it includes are small; a bigger one is not one.
constexpr std::size_t kMaxPlugstackBytes = 1 << 20;

std::string joined(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

}  // namespace

std::vector<std::string> check_plugstack(const std::string& path) {
  const auto line = find_plugstack_line(path, "spank_dl.so", [](const std::string& file) {
    // Slurm would not read it either: the check fails as a bad line does.
    try {
      return std::optional<std::string>(sys::read_file(file, kMaxPlugstackBytes));
    } catch (const SystemError& e) {
      throw InputError(e.what());
    }
  });
  if (!line) {
    throw InputError(
        fmt::format("{}: no line loads spank_dl.so (nor in a file it includes)", path));
  }
  const std::string where = fmt::format("{}:{}", line->file, line->line);
  SiteConfig site;
  try {
    site = parse_site_config(line->args);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: spank_dl.so would refuse to load: {}", where, e.what()));
  }
  if (line->plugin.empty() || line->plugin[0] != '/') {
    throw InputError(fmt::format("{}: '{}': give the plugin's absolute path", where, line->plugin));
  }
  if (sys::file_type(line->plugin) != sys::FileType::file) {
    throw InputError(
        fmt::format("{}: {}: no such file (Slurm would fail to load it)", where, line->plugin));
  }
  std::vector<std::string> report{
      fmt::format("{}: {} {} {}", where, line->kind, line->plugin, joined(line->args))};
  const std::string roots = joined(site.effective_ckpt_roots());
  report.push_back(fmt::format("default_ckpt_root={} allowed_ckpt_roots={} max_gpus={}",
                               site.default_ckpt_root, roots, site.max_gpus));
  report.push_back(fmt::format(
      "default_grace={}s drain_after={} down_failed_batch_host={} "
      "gpu_metrics={} slurm_bindir={}",
      site.default_grace.count(), site.drain_after, site.down_failed_batch_host ? "yes" : "no",
      site.gpu_metrics_dir.empty() ? "off" : site.gpu_metrics_dir, site.slurm_bindir));
  if (site.drain_after > 0 || site.down_failed_batch_host) {
    for (const char* tool : {"scontrol", "sinfo", "squeue"}) {
      const std::string tool_path = slurm_tool_path(site, tool);
      if (::access(tool_path.c_str(), X_OK) != 0) {
        throw InputError(fmt::format(
            "{}: {} is not an executable file: drain_after and down_failed_batch_host run "
            "Slurm's {} as root; set slurm_bindir= to the directory of Slurm's commands",
            where, tool_path, tool));
      }
    }
  }
  if (line->kind == "optional") {
    report.push_back(
        "optional: Slurm goes on when the plugin refuses to load; make it required once every "
        "host passes this check");
  }
  report.push_back("OK");
  return report;
}

}  // namespace dl
