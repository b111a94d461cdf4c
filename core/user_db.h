// The user database (passwd, through NSS: files, LDAP, SSSD) for one uid.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace dl {

struct UserEntry {
  std::string name;
  std::string home;
};

// nullopt when the uid has no entry or the lookup fails.
std::optional<UserEntry> lookup_user(uid_t uid);

// For messages: "name (uid N)", or "uid N" when the uid has no entry.
std::string describe_user(uid_t uid);

}  // namespace dl
