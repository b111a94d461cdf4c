// The two flags every slurm-dl tool has: --version, one format everywhere, and the hidden
// --list-options, which prints the tool's own option table (one "SUBCOMMAND --option
// DL_VARIABLE" line per option, "-" for none) so that tests/unit/options.sh can check each
// option against the man page, --help and docs/reference.md without parsing C++.
// Header-only: only the tools, which use CLI11, include it.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>

#include "config.h"

namespace dl {

inline std::string version_line(const std::string& tool) {
  return tool + " (" PACKAGE_NAME ") " PACKAGE_VERSION;
}

namespace cli_detail {

inline void list_options(const CLI::App& app, const std::string& sub, std::ostream& out) {
  for (const CLI::Option* o : app.get_options()) {
    if (o->get_group().empty() || o == app.get_help_ptr()) continue;  // hidden, or every app's
    for (const auto& name : o->get_lnames()) {
      out << (sub.empty() ? "-" : sub) << " --" << name << " "
          << (o->get_envname().empty() ? "-" : o->get_envname()) << "\n";
    }
  }
  for (const CLI::App* s : app.get_subcommands({})) {
    list_options(*s, sub.empty() ? s->get_name() : sub + " " + s->get_name(), out);
  }
}

}  // namespace cli_detail

// Adds --version and --list-options to `app` (the list is made when asked for, so it
// includes what is added later).
inline void add_standard_flags(CLI::App& app, const std::string& tool) {
  app.set_version_flag("--version", version_line(tool), "print the version and exit");
  app.add_flag_callback("--list-options",
                        [&app] {
                          cli_detail::list_options(app, "", std::cout);
                          throw CLI::Success();
                        })
      ->group("");
}

// A tool's main(): `run`, with what it throws said as one line "TOOL: what" and exit 1.
inline int run_tool(const char* tool, int (*run)(int, char**), int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", tool, e.what());
    return 1;
  }
}

}  // namespace dl
