#include "sched/spank_env.h"

#include <algorithm>
#include <cstring>

#include "sched/submission.h"

namespace dl {
namespace {

// Whether `kv` is "<name>=...", reading at most name.size() + 1 bytes of it.
bool names(const char* kv, std::string_view name) {
  return std::strncmp(kv, name.data(), name.size()) == 0 && kv[name.size()] == '=';
}

bool carries_spec(const char* kv) {
  if (std::strncmp(kv, "DL_", 3) != 0) return false;
  if (names(kv, kSpecMarker)) return true;
  return std::any_of(option_infos().begin(), option_infos().end(),
                     [&](const OptionInfo& o) { return names(kv, o.env); });
}

}  // namespace

EnvLookup spank_env_lookup(const char* const* env, std::size_t size) {
  const std::size_t examined = std::min(size, kMaxSpankEnvEntries);
  return [env, examined](const std::string& name) -> std::optional<std::string> {
    for (std::size_t i = 0; env && i < examined; ++i) {
      const char* kv = env[i];
      if (!kv || !names(kv, name)) continue;
      const char* value = kv + name.size() + 1;
      return std::string(value, ::strnlen(value, kMaxSpankEnvEntry));
    }
    return std::nullopt;
  };
}

bool spank_env_has_spec(const char* const* env, std::size_t size) {
  const std::size_t examined = std::min(size, kMaxSpankEnvEntries);
  for (std::size_t i = 0; env && i < examined; ++i) {
    if (env[i] && names(env[i], kSpecMarker)) return true;
  }
  return false;
}

std::optional<Spec> spank_env_spec(const char* const* env, std::size_t size) {
  return spec_from_env(spank_env_lookup(env, size));
}

std::vector<std::string> normalized_spank_env(const char* const* env, std::size_t size,
                                              const Spec& spec) {
  std::vector<std::string> out;
  for (const auto& [name, value] : spec.to_env()) out.push_back(name + "=" + value);
  for (std::size_t i = 0; env && i < size; ++i) {
    if (env[i] && !carries_spec(env[i])) out.emplace_back(env[i]);
  }
  return out;
}

}  // namespace dl
