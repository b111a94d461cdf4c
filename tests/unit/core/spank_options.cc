// Prints the --dl-* option table for tests/unit/options.sh: one "--NAME VARIABLE USAGE"
// line per option, USAGE as `sbatch --help` shows it with the default site settings.
#include <cstdio>

#include "core/spec.h"

int main() {
  const dl::SiteConfig site;
  for (const auto& o : dl::option_infos()) {
    std::printf("--%s %s %s\n", o.name, o.env, dl::option_usage(o, site).c_str());
  }
  return 0;
}
