#include "core/user_db.h"

#include <fmt/format.h>
#include <pwd.h>

#include <cerrno>
#include <vector>

namespace dl {

std::optional<UserEntry> lookup_user(uid_t uid) {
  // Entries from a directory server can outgrow any fixed buffer: grown on ERANGE.
  std::vector<char> buf(16384);
  while (true) {
    struct passwd pw;
    struct passwd* found = nullptr;
    const int rc = ::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found);
    if (rc == ERANGE && buf.size() < (1u << 20)) {
      buf.resize(buf.size() * 4);
      continue;
    }
    if (rc != 0 || found == nullptr) return std::nullopt;
    return UserEntry{pw.pw_name ? pw.pw_name : "", pw.pw_dir ? pw.pw_dir : ""};
  }
}

std::string describe_user(uid_t uid) {
  const auto user = lookup_user(uid);
  return user ? fmt::format("{} (uid {})", user->name, uid) : fmt::format("uid {}", uid);
}

}  // namespace dl
