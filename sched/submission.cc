#include "sched/submission.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace dl {

std::vector<std::string> partition_names(std::string_view list) {
  if (list.size() > kMaxPartitionListChars) {
    throw InputError(fmt::format(
        "--partition: a list of {} characters; a slurm-dl job may name at most {} partitions "
        "in at most {} characters",
        list.size(), kMaxPartitions, kMaxPartitionListChars));
  }
  std::vector<std::string> names;
  std::size_t count = 0;
  std::size_t start = 0;
  while (start <= list.size()) {
    const auto comma = std::min(list.find(',', start), list.size());
    std::string name(list.substr(start, comma - start));
    start = comma + 1;
    if (name.empty()) continue;
    if (++count > kMaxPartitions) {
      throw InputError(fmt::format(
          "--partition: more than {} partitions; a slurm-dl job may name at most {} partitions",
          kMaxPartitions, kMaxPartitions));
    }
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

void check_spank_env_size(std::size_t entries, std::size_t longest) {
  if (entries > kMaxSpankEnvEntries) {
    throw InputError(fmt::format(
        "the job's SPANK environment has {} entries; a slurm-dl job may have at most {}", entries,
        kMaxSpankEnvEntries));
  }
  if (longest > kMaxSpankEnvEntry) {
    throw InputError(fmt::format(
        "the job's SPANK environment has an entry of {} bytes; a slurm-dl job's are at most {}",
        longest, kMaxSpankEnvEntry));
  }
}

}  // namespace dl
