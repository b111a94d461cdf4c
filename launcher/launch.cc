#include "launcher/launch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace dl {
namespace {

// json's get<int>() casts whatever number it finds, a float or one out of range too.
std::int64_t whole_number(const nlohmann::json& j, const char* key, std::int64_t min,
                          std::int64_t max) {
  const nlohmann::json& v = j.at(key);
  const bool in_range =
      v.is_number_unsigned()  ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(max)
      : v.is_number_integer() ? v.get<std::int64_t>() >= min && v.get<std::int64_t>() <= max
                              : false;
  if (!in_range ||
      (v.is_number_unsigned() && static_cast<std::int64_t>(v.get<std::uint64_t>()) < min)) {
    throw SystemError(fmt::format("{} is not a whole number from {} to {}", key, min, max));
  }
  return v.is_number_unsigned() ? static_cast<std::int64_t>(v.get<std::uint64_t>())
                                : v.get<std::int64_t>();
}

}  // namespace

std::string encode_rendezvous(const Rendezvous& r) {
  if (!r.error.empty()) return nlohmann::json{{"error", r.error}}.dump();
  const nlohmann::json j = {{"addr", r.master_addr},        {"port", r.master_port},
                            {"ctrl", r.control_port},       {"node", r.node},
                            {"nccl", r.nccl_id_hex},        {"resume", r.resume_from},
                            {"resume_step", r.resume_step}, {"key", r.secret}};
  return j.dump();
}

Rendezvous decode_rendezvous(std::string_view text) {
  try {
    const auto j = nlohmann::json::parse(text);
    Rendezvous r;
    if (j.contains("error")) {
      r.error = j.at("error").get<std::string>();
      return r;
    }
    r.master_addr = j.at("addr").get<std::string>();
    r.master_port = static_cast<std::uint16_t>(whole_number(j, "port", 0, 65535));
    r.control_port = static_cast<std::uint16_t>(whole_number(j, "ctrl", 0, 65535));
    r.node = j.at("node").get<std::string>();
    r.nccl_id_hex = j.at("nccl").get<std::string>();
    r.resume_from = j.at("resume").get<std::string>();
    r.resume_step = whole_number(j, "resume_step", -1, INT64_MAX);
    r.secret = j.at("key").get<std::string>();
    if (r.master_addr.empty() || r.master_port == 0 || r.control_port == 0) {
      throw SystemError("address or port missing");
    }
    if (r.secret.empty()) throw SystemError("key missing");
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw SystemError(fmt::format("malformed rendezvous from rank 0 ({}): {}", e.what(), text));
  } catch (const SystemError& e) {
    throw SystemError(fmt::format("malformed rendezvous from rank 0 ({}): {}", e.what(), text));
  }
}

std::string to_hex(const void* bytes, std::size_t size) {
  static constexpr char digits[] = "0123456789abcdef";
  const auto* p = static_cast<const unsigned char*>(bytes);
  std::string out;
  out.reserve(size * 2);
  for (std::size_t i = 0; i < size; ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}

EnvChanges program_env(const TaskContext& task) {
  const RankLayout& l = task.layout;
  const Rendezvous& r = task.rendezvous;
  EnvChanges c;
  const auto set = [&](const char* name, std::string value) {
    c.set.emplace_back(name, std::move(value));
  };
  set("RANK", std::to_string(l.rank));
  set("WORLD_SIZE", std::to_string(l.world_size));
  set("LOCAL_RANK", std::to_string(l.local_rank));
  set("LOCAL_WORLD_SIZE", std::to_string(l.local_world_size));
  set("GROUP_RANK", std::to_string(l.node_rank));
  set("MASTER_ADDR", r.master_addr);
  set("MASTER_PORT", std::to_string(r.master_port));
  set("TORCHELASTIC_RESTART_COUNT", std::to_string(task.restart_count));
  set("DL_RESTART_COUNT", std::to_string(task.restart_count));
  set("DL_CLIENT_FILE", task.client_file);
  // Unset rather than empty: "no checkpoint" must not look like a path to a program
  // that only tests whether the variable exists.
  const auto set_or_unset = [&](const char* name, const std::string& value) {
    if (value.empty()) {
      c.unset.emplace_back(name);
    } else {
      set(name, value);
    }
  };
  set_or_unset("DL_CKPT_DIR", task.ckpt_dir);
  set_or_unset("DL_RESUME_FROM", r.resume_from);
  set_or_unset("DL_NCCL_UNIQUE_ID", r.nccl_id_hex);
  // torch.distributed's env:// rendezvous asks for the libuv TCPStore since torch 2.4,
  // and torch builds without libuv (Debian's 2.6) then fail in init_process_group. The
  // classic store works with every torch release.
  c.defaults.emplace_back("USE_LIBUV", "0");
  if (!task.socket_ifname.empty()) {
    // gloo and NCCL otherwise pick an interface by their own rules, which in a network
    // namespace or on a multi-homed node is often one the peers cannot reach.
    c.defaults.emplace_back("GLOO_SOCKET_IFNAME", task.socket_ifname);
    c.defaults.emplace_back("NCCL_SOCKET_IFNAME", task.socket_ifname);
  }
  return c;
}

std::vector<std::string> apply_env(const std::vector<std::string>& base,
                                   const EnvChanges& changes) {
  const auto name_of = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
  const auto find = [&](auto& env, const std::string& name) {
    return std::find_if(env.begin(), env.end(),
                        [&](const std::string& e) { return name_of(e) == name; });
  };
  std::vector<std::string> env;
  for (const auto& entry : base) {
    const std::string name = name_of(entry);
    if (std::find(changes.unset.begin(), changes.unset.end(), name) != changes.unset.end()) {
      continue;
    }
    env.push_back(entry);
  }
  for (const auto& [name, value] : changes.set) {
    const auto it = find(env, name);
    if (it != env.end()) {
      *it = name + "=" + value;
    } else {
      env.push_back(name + "=" + value);
    }
  }
  for (const auto& [name, value] : changes.defaults) {
    if (find(env, name) == env.end()) env.push_back(name + "=" + value);
  }
  return env;
}

std::vector<std::string> module_paths(std::string_view own_dir, std::string_view bindir,
                                      std::string_view pkglibdir, std::string_view module) {
  const std::string name(module);
  std::vector<std::string> paths = {std::string(own_dir) + "/.libs/" + name};
  // bindir starts with '/', so a match ends a whole path component.
  const bool below_root = !bindir.empty() && bindir.front() == '/' &&
                          own_dir.size() > bindir.size() &&
                          own_dir.substr(own_dir.size() - bindir.size()) == bindir;
  if (below_root) {
    paths.push_back(std::string(own_dir.substr(0, own_dir.size() - bindir.size())) +
                    std::string(pkglibdir) + "/" + name);
  }
  paths.push_back(std::string(pkglibdir) + "/" + name);
  return paths;
}

}  // namespace dl
