#include "launcher/resume.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "core/parse.h"

namespace dl {

std::optional<ResumePoint> newest_checkpoint(const std::string& ckpt_dir) {
  std::ifstream latest(ckpt_dir + "/latest");
  std::string name;
  if (!latest || !std::getline(latest, name) || name.rfind("step-", 0) != 0) return std::nullopt;
  const std::string path = ckpt_dir + "/" + name;
  struct stat st {};
  if (stat((path + "/manifest.json").c_str(), &st) != 0) return std::nullopt;
  ResumePoint r;
  r.path = path;
  r.step = static_cast<std::int64_t>(parse_uint("latest", name.substr(5), 0, INT64_MAX));
  r.written = WallClock::from_time_t(st.st_mtime);
  return r;
}

}  // namespace dl
