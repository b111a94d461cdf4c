#include "spank/state.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/private_dir.h"
#include "core/user_db.h"

namespace dl::spank {
namespace {

SiteConfig& mutable_site() {
  static SiteConfig site;
  return site;
}

RawOptions& mutable_raw() {
  static RawOptions raw;
  return raw;
}

int on_option(int index, const char* optarg, int /*remote*/) noexcept {
  try {
    const auto& infos = option_infos();
    if (index < 0 || static_cast<std::size_t>(index) >= infos.size()) return -1;
    mutable_raw()[infos[static_cast<std::size_t>(index)].name] = optarg ? optarg : "";
    return 0;
  } catch (...) {
    return -1;
  }
}

UserEntry lookup_uncached(uid_t uid) {
  auto user = lookup_user(uid);
  if (!user) throw SystemError(fmt::format("couldn't look up uid {} in the user database", uid));
  return std::move(*user);
}

// A DL submission needs the user's name and home three times; one user database lookup
// (a passwd/NSS round trip, or a directory server's) serves them all. A process serves
// one user, so the last entry is kept.
UserEntry lookup(uid_t uid) {
  static std::mutex mutex;
  static std::optional<std::pair<uid_t, UserEntry>> last;
  const std::lock_guard<std::mutex> lock(mutex);
  if (!last || last->first != uid) last.emplace(uid, lookup_uncached(uid));
  return last->second;
}

}  // namespace

void load_site_config(int argc, char** argv) {
  mutable_site() = parse_site_config(std::vector<std::string>(argv, argv + argc));
}

const SiteConfig& site_config() { return mutable_site(); }

void make_default_ckpt_root() {
  const std::string& root = site_config().default_ckpt_root;
  try {
    make_shared_root(root);
  } catch (const std::exception& e) {
    slurm_error(
        "dl: default_ckpt_root: %s; jobs with the default checkpoint directory will be refused "
        "on this node",
        e.what());
  }
}

void check_ckpt_root_sharing() {
  const SiteConfig& site = site_config();
  const std::string& root = site.default_ckpt_root;
  if (site.shared_ckpt_root == true) return;
  if (site.shared_ckpt_root == false) {
    slurm_info(
        "dl: default_ckpt_root %s is node-local (shared_ckpt_root=no): a job requeued onto "
        "other nodes starts without its checkpoints; give --dl-ckpt-dir on a shared file system",
        root.c_str());
    return;
  }
  struct statfs fs;
  if (::statfs(root.c_str(), &fs) != 0) {
    slurm_error("dl: couldn't statfs default_ckpt_root %s: %s", root.c_str(), std::strerror(errno));
    return;
  }
  const FsKind kind = classify_fs_type(static_cast<std::uint64_t>(fs.f_type));
  if (kind.sharing == FsSharing::shared) return;
  slurm_error(
      "dl: default_ckpt_root %s is on %s, %s: a job requeued onto other nodes will not find "
      "its checkpoints there. Put it on a shared file system (nfs, lustre, gpfs, beegfs, "
      "cephfs), or set shared_ckpt_root=yes in plugstack.conf if it is shared",
      root.c_str(), kind.name.c_str(),
      kind.sharing == FsSharing::local ? "a node-local file system"
                                       : "a file system not known to be shared");
}

void register_options(spank_t sp) {
  // Slurm keeps pointers into these tables for the life of the process.
  static const std::vector<std::string> usages = [] {
    std::vector<std::string> u;
    for (const auto& o : option_infos()) u.push_back(option_usage(o, site_config()));
    return u;
  }();
  static std::vector<struct spank_option> table = [] {
    std::vector<struct spank_option> t;
    int index = 0;
    for (const auto& o : option_infos()) {
      t.push_back({const_cast<char*>(o.name), const_cast<char*>(o.arg),
                   const_cast<char*>(usages[static_cast<std::size_t>(index)].c_str()),
                   o.arg != nullptr ? 1 : 0, index, on_option});
      ++index;
    }
    return t;
  }();
  for (auto& option : table) {
    const spank_err_t rc = spank_option_register(sp, &option);
    if (rc != ESPANK_SUCCESS) {
      throw SystemError(fmt::format("couldn't register --{}: {}", option.name, spank_strerror(rc)));
    }
  }
}

const RawOptions& raw_options() { return mutable_raw(); }

std::string home_of(uid_t uid) { return lookup(uid).home; }
std::string user_name_of(uid_t uid) { return lookup(uid).name; }

sys::Fd open_plugin_dir(const std::string& path, mode_t mode, struct stat& st) {
  sys::make_dir(path, mode);
  sys::Fd dir = sys::open_file(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fstat(dir.get(), &st) != 0) {
    throw SystemError(fmt::format("fstat {}: {}", path, std::strerror(errno)));
  }
  return dir;
}

sys::Fd open_drain_state_dir() {
  const std::string& path = site_config().drain_state_dir;
  struct stat st {};
  sys::Fd dir = open_plugin_dir(path, 0700, st);
  if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    throw SystemError(fmt::format(
        "drain_state_dir {} must belong to uid {} with mode 0700 (it has uid {}, mode {:o}): "
        "not recording or draining",
        path, geteuid(), st.st_uid, st.st_mode & 07777));
  }
  return dir;
}

}  // namespace dl::spank
