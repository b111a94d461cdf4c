// libFuzzer target for the --dl-* option parser: lines "name=value" are options,
// "ENV:NAME=value" environment defaults, "SITE:key=value" plugstack arguments. Every
// input must either be accepted or rejected with dl::InputError (any other
// exception aborts), and an accepted spec must survive to_env -> spec_from_env.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/spec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  dl::RawOptions raw;
  std::map<std::string, std::string> env;
  std::vector<std::string> site_args;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    const auto eq = line.find('=');
    if (line.rfind("SITE:", 0) == 0) {
      site_args.push_back(line.substr(5));
    } else if (line.rfind("ENV:", 0) == 0 && eq != std::string::npos) {
      env[line.substr(4, eq - 4)] = line.substr(eq + 1);
    } else if (eq != std::string::npos) {
      raw[line.substr(0, eq)] = line.substr(eq + 1);
    } else {
      raw[line] = "";
    }
  }
  const dl::EnvLookup lookup = [&env](const std::string& name) -> std::optional<std::string> {
    const auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  try {
    const dl::SiteConfig site = dl::parse_site_config(site_args);
    const auto spec = dl::make_spec(raw, lookup, site, "/home/fuzz");
    if (!spec) return 0;
    std::map<std::string, std::string> vars;
    for (const auto& [k, v] : spec->to_env()) vars[k] = v;
    const auto back =
        dl::spec_from_env([&vars](const std::string& name) -> std::optional<std::string> {
          const auto it = vars.find(name);
          if (it == vars.end()) return std::nullopt;
          return it->second;
        });
    if (!back || back->to_env() != spec->to_env()) std::abort();
  } catch (const dl::InputError&) {
  }
  return 0;
}
