#include "core/gpu_owner.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/error.h"

namespace dl {
namespace {

bool is_name(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

std::uint64_t decimal(std::string_view s, std::uint64_t max) {
  if (s.empty() || s.size() > 10) throw InputError("not a number");
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') throw InputError("not a number");
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  if (v > max) throw InputError("out of range");
  return v;
}

}  // namespace

std::vector<unsigned> parse_gpu_index_list(std::string_view text) {
  std::vector<unsigned> gpus;
  if (text.empty()) return gpus;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = std::min(text.find(',', start), text.size());
    const auto item = text.substr(start, comma - start);
    unsigned g = 0;
    try {
      g = static_cast<unsigned>(decimal(item, 1023));
    } catch (const InputError&) {
      throw InputError(
          fmt::format("GPU list '{}': expected GPU indices 0-1023 separated by commas", text));
    }
    if (std::find(gpus.begin(), gpus.end(), g) != gpus.end()) {
      throw InputError(fmt::format("GPU list '{}': GPU {} given twice", text, g));
    }
    gpus.push_back(g);
    start = comma + 1;
  }
  return gpus;
}

std::string gpu_owner_file_name(const GpuOwner& owner) {
  return fmt::format("{}.{}", owner.node, owner.job);
}

std::string format_gpu_owner(const GpuOwner& owner) {
  return fmt::format("node={} job={} uid={} user={} gpus={} account={}\n", owner.node, owner.job,
                     owner.uid, owner.user, fmt::join(owner.gpus, ","), owner.account);
}

GpuOwner parse_gpu_owner(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return InputError(fmt::format("GPU owner record: {}", why));
  };
  if (text.size() > kMaxGpuOwnerBytes) throw bad("longer than 4096 bytes");
  if (text.empty() || text.back() != '\n') throw bad("not one line ending in a newline");
  text.remove_suffix(1);
  if (text.find('\n') != std::string_view::npos) throw bad("more than one line");
  static const char* const kKeys[] = {"node", "job", "uid", "user", "gpus", "account"};
  std::map<std::string, std::string> fields;
  std::size_t start = 0;
  for (const char* key : kKeys) {
    if (start == text.size() + 1 && std::string_view(key) == "account") break;
    const auto space = std::min(text.find(' ', start), text.size());
    const auto field = text.substr(start, space - start);
    const auto eq = field.find('=');
    if (eq == std::string_view::npos || field.substr(0, eq) != key) {
      throw bad(fmt::format("expected {}=... as field {}", key, fields.size() + 1));
    }
    fields[key] = std::string(field.substr(eq + 1));
    start = space + 1;
  }
  if (start <= text.size()) throw bad("more than six fields");
  GpuOwner o;
  o.node = fields["node"];
  o.user = fields["user"];
  if (!is_name(o.node)) throw bad(fmt::format("node '{}' is not a node name", o.node));
  if (!is_name(o.user)) throw bad(fmt::format("user '{}' is not a user name", o.user));
  o.account = fields["account"];
  if (!o.account.empty() && !is_name(o.account)) {
    throw bad(fmt::format("account '{}' is not an account name", o.account));
  }
  try {
    o.job = static_cast<std::uint32_t>(decimal(fields["job"], 0xffffffffu));
    o.uid = static_cast<uid_t>(decimal(fields["uid"], 0xfffffffeu));
  } catch (const InputError& e) {
    throw bad(fmt::format("job or uid: {}", e.what()));
  }
  if (o.job == 0) throw bad("job 0");
  o.gpus = parse_gpu_index_list(fields["gpus"]);
  if (o.gpus.empty()) throw bad("no GPUs");
  return o;
}

}  // namespace dl
