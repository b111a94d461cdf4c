// What job_submit/dl checks before it trusts a submission: the controller cannot rely
// on the SPANK plugin having run (a client built on libslurm sets the job's SPANK
// environment as it likes), so it re-checks the DL spec against the site's limits and
// bounds the work one submission can cause. Pure: the plugin supplies the strings.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace dl {

// At most this many partitions in a DL job's --partition list, of at most this many
// characters in all: each is shaped against the partition's nodes.
inline constexpr std::size_t kMaxPartitions = 64;
inline constexpr std::size_t kMaxPartitionListChars = 4096;
// A DL job's SPANK environment: at most this many entries, each at most this long.
inline constexpr std::size_t kMaxSpankEnvEntries = 1024;
inline constexpr std::size_t kMaxSpankEnvEntry = 4096;

// The distinct names of a --partition list ("a,b,a" -> {a, b}), in order. Throws
// InputError naming the limit when the list is longer than the bounds above.
std::vector<std::string> partition_names(std::string_view list);

// Throws InputError when a SPANK environment of `entries` strings holds more entries
// than kMaxSpankEnvEntries or an entry longer than kMaxSpankEnvEntry (`longest`).
void check_spank_env_size(std::size_t entries, std::size_t longest);

}  // namespace dl
