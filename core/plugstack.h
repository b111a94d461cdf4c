// plugstack.conf as Slurm reads it, for the one line that loads a given SPANK plugin:
// job_submit/dl reads the SPANK plugin's site settings from it, and `dlrun
// --check-config` checks them with the plugin's own parser (parse_site_config) before a
// site makes the plugin `required`, where a bad argument would fail every sbatch and srun.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dl {

// The plugstack.conf lines that matter for one plugin.
struct PlugstackScan {
  // The arguments of the plugin's line (its key=value site settings); nullopt when the
  // text has no such line.
  std::optional<std::vector<std::string>> dl_args;
  // That line: its number (from 1), its first word (required or optional) and the
  // plugin's path as written.
  std::size_t dl_line = 0;
  std::string dl_kind;
  std::string dl_plugin;
  // The patterns of its "include" lines, for the caller to expand and scan too.
  std::vector<std::string> includes;
};

// Reads one plugstack.conf text ("required|optional <plugin> [args...]" and
// "include <glob>" lines, '#' comments). `plugin_name` is matched against the last
// path component of the plugin ("spank_dl.so").
PlugstackScan scan_plugstack(std::string_view text, std::string_view plugin_name);

// The plugin's line in `path` or a file it includes (glob patterns), at most 256 files.
struct PlugstackLine {
  std::string file;
  std::size_t line = 0;
  std::string kind;    // required or optional
  std::string plugin;  // the path as written
  std::vector<std::string> args;
};
// `read` gives a file's text, or nullopt to skip it.
using ReadText = std::function<std::optional<std::string>(const std::string& path)>;
std::optional<PlugstackLine> find_plugstack_line(const std::string& path,
                                                 std::string_view plugin_name,
                                                 const ReadText& read);

// `dlrun --check-config FILE`: the spank_dl.so line of FILE (or a file it includes),
// its arguments parsed as the plugin parses them, and the files the plugin needs (the
// plugin itself; Slurm's tools in slurm_bindir when drain_after or
// down_failed_batch_host is on). Returns the report's lines; throws InputError with the
// file, line and the plugin's own message when the plugin would refuse to load.
std::vector<std::string> check_plugstack(const std::string& path);

}  // namespace dl
