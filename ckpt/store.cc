#include "ckpt/store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "ckpt/names.h"
#include "core/error.h"
#include "core/sysio.h"

namespace dl::ckpt {

std::vector<StepDir> committed_steps(const std::string& dir) {
  const sys::FileType type = sys::file_type(dir);
  if (type != sys::FileType::directory && type != sys::FileType::missing) {
    throw CorruptError(fmt::format("{}: not a directory", dir));
  }
  return committed_steps(sys::open_dir(dir));
}

std::vector<StepDir> committed_steps(const sys::Fd& dir) {
  std::vector<StepDir> steps;
  for (const std::string& name : sys::list_dir_fd(dir)) {
    const auto step = parse_step_dir_name(name);
    if (!step) continue;
    if (sys::file_type_at(dir, name) == sys::FileType::directory) {
      steps.push_back({*step, sys::join(dir.path(), name)});
    }
  }
  std::sort(steps.begin(), steps.end(),
            [](const StepDir& a, const StepDir& b) { return a.step > b.step; });
  return steps;
}

sys::Fd open_own_dir(const std::string& path) {
  sys::Fd dir = sys::open_dir(path);
  struct stat st;
  if (::fstat(dir.get(), &st) != 0) {
    throw SystemError(fmt::format("couldn't stat {}: {}", path, std::strerror(errno)));
  }
  if (st.st_uid != ::geteuid()) {
    throw SystemError(fmt::format(
        "refusing checkpoint directory {}: owned by uid {}, not by this user (uid {}); its "
        "owner could replace the checkpoints in it",
        path, st.st_uid, ::geteuid()));
  }
  if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
    throw SystemError(fmt::format(
        "refusing checkpoint directory {}: mode {:o} lets every user rename the checkpoints "
        "in it (chmod o-w, or +t)",
        path, st.st_mode & 07777));
  }
  return dir;
}

sys::Fd open_step_dir(const std::string& step_dir) {
  const sys::FileType type = sys::file_type(step_dir);
  if (type == sys::FileType::missing) {
    throw SystemError(
        fmt::format("couldn't open checkpoint {}: No such file or directory", step_dir));
  }
  if (type != sys::FileType::directory) {
    throw CorruptError(
        fmt::format("{}: not a checkpoint (a checkpoint is a step directory)", step_dir));
  }
  std::string p = step_dir;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  try {
    // A link swapped in after the check above is refused, not followed.
    return sys::open_at(sys::open_dir(sys::parent_dir(p)), sys::base_name(p),
                        O_RDONLY | O_DIRECTORY);
  } catch (const SystemError& e) {
    throw CorruptError(e.what());
  }
}

sys::Fd open_step_dir(const sys::Fd& dir, const std::string& name) {
  try {
    return sys::open_at(dir, name, O_RDONLY | O_DIRECTORY);
  } catch (const SystemError& e) {
    if (sys::file_type_at(dir, name) == sys::FileType::missing) throw;
    throw CorruptError(e.what());
  }
}

Manifest read_manifest(const std::string& step_dir) {
  return read_manifest(open_step_dir(step_dir));
}

Manifest read_manifest(const sys::Fd& dir) {
  const std::string& step_dir = dir.path();
  const std::string path = sys::join(step_dir, kManifestName);
  if (sys::file_type_at(dir, kManifestName) == sys::FileType::missing) {
    throw CorruptError(fmt::format("{}: not a checkpoint (no {})", step_dir, kManifestName));
  }
  std::string text;
  try {
    text = sys::read_file_at(dir, kManifestName, kMaxManifestBytes);
  } catch (const SystemError& e) {
    throw CorruptError(e.what());
  }
  Manifest m = manifest_from_json(text, path);
  if (const auto step = parse_step_dir_name(sys::base_name(step_dir)); step && *step != m.step) {
    throw CorruptError(
        fmt::format("{}: holds step {}, the directory's name says {}", path, m.step, *step));
  }
  return m;
}

std::optional<std::string> read_latest(const std::string& dir) {
  if (sys::file_type(dir) == sys::FileType::missing) return std::nullopt;
  return read_latest(sys::open_dir(dir));
}

std::optional<std::string> read_latest(const sys::Fd& fd) {
  if (sys::file_type_at(fd, kLatestName) != sys::FileType::file) return std::nullopt;
  std::string text;
  try {
    text = sys::read_file_at(fd, kLatestName, 4096);
  } catch (const SystemError& e) {
    // Swapped for something else since: only a hint anyway (readers list the steps).
    return std::nullopt;
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

void write_latest(const sys::Fd& dir, std::uint64_t step) {
  sys::write_file_durably_at(dir, kLatestName, step_dir_name(step) + "\n");
}

void write_latest(const std::string& dir, std::uint64_t step) {
  write_latest(sys::open_dir(dir), step);
}

void remove_step_dir(const sys::Fd& dir, const std::string& name, std::uint64_t step) {
  const std::string doomed = deleting_dir_name(step, sys::random_hex());
  sys::rename_at(dir, name, dir, doomed);
  sys::fsync_fd(dir);
  sys::remove_tree_at(dir, doomed);
}

void remove_step_dir(const std::string& dir, const std::string& path, std::uint64_t step) {
  remove_step_dir(sys::open_dir(dir), sys::base_name(path), step);
}

}  // namespace dl::ckpt
