#include "ckpt/store.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "ckpt/names.h"
#include "core/error.h"
#include "core/sysio.h"

namespace dl::ckpt {
namespace {

// Large enough for a manifest of 10^6 tensor parts; a bigger file is not ours.
constexpr std::size_t kMaxManifestBytes = std::size_t{1} << 30;

}  // namespace

std::vector<StepDir> committed_steps(const std::string& dir) {
  const sys::FileType type = sys::file_type(dir);
  if (type != sys::FileType::directory && type != sys::FileType::missing) {
    throw CorruptError(fmt::format("{}: not a directory", dir));
  }
  std::vector<StepDir> steps;
  for (const std::string& name : sys::list_dir(dir)) {
    const auto step = parse_step_dir_name(name);
    if (!step) continue;
    std::string path = sys::join(dir, name);
    if (sys::file_type(path) == sys::FileType::directory) steps.push_back({*step, std::move(path)});
  }
  std::sort(steps.begin(), steps.end(),
            [](const StepDir& a, const StepDir& b) { return a.step > b.step; });
  return steps;
}

Manifest read_manifest(const std::string& step_dir) {
  const sys::FileType type = sys::file_type(step_dir);
  if (type == sys::FileType::missing) {
    throw SystemError(
        fmt::format("couldn't open checkpoint {}: No such file or directory", step_dir));
  }
  if (type != sys::FileType::directory) {
    throw CorruptError(
        fmt::format("{}: not a checkpoint (a checkpoint is a step directory)", step_dir));
  }
  const std::string path = sys::join(step_dir, kManifestName);
  if (sys::file_type(path) == sys::FileType::missing) {
    throw CorruptError(fmt::format("{}: not a checkpoint (no {})", step_dir, kManifestName));
  }
  std::string text;
  try {
    text = sys::read_file(path, kMaxManifestBytes);
  } catch (const SystemError& e) {
    throw CorruptError(e.what());
  }
  Manifest m = manifest_from_json(text, path);
  std::string name = step_dir;
  while (name.size() > 1 && name.back() == '/') name.pop_back();
  name = name.substr(name.rfind('/') == std::string::npos ? 0 : name.rfind('/') + 1);
  if (const auto step = parse_step_dir_name(name); step && *step != m.step) {
    throw CorruptError(
        fmt::format("{}: holds step {}, the directory's name says {}", path, m.step, *step));
  }
  return m;
}

std::optional<std::string> read_latest(const std::string& dir) {
  const std::string path = sys::join(dir, kLatestName);
  if (sys::file_type(path) != sys::FileType::file) return std::nullopt;
  std::string text = sys::read_file(path, 4096);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

void write_latest(const std::string& dir, std::uint64_t step) {
  sys::write_file_durably(sys::join(dir, kLatestName), step_dir_name(step) + "\n");
}

void remove_step_dir(const std::string& dir, const std::string& path, std::uint64_t step) {
  const std::string doomed = sys::join(dir, deleting_dir_name(step, ::getpid()));
  sys::rename_path(path, doomed);
  sys::fsync_dir(dir);
  sys::remove_tree(doomed);
}

}  // namespace dl::ckpt
