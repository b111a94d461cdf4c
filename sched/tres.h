// GPU counts in Slurm's TRES request strings, as job_desc_msg_t carries them
// ("gres:gpu:2", "gres:gpu:a100:4,gres:mps:100"). Pure string functions so that the
// job_submit plugin can check a DL spec against the native request and replace the
// native GPU request with the gang's shape.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dl {

// Total GPUs a comma-separated TRES list asks for: the sum over its gpu entries
// ("gres:gpu", "gres:gpu:4", "gres:gpu:a100:4", also without the "gres:" prefix); an
// entry without a count means 1. nullopt when no entry names gpu. Throws InputError
// on a gpu entry whose count is not a whole number.
std::optional<std::uint64_t> gpus_in_tres(std::string_view tres);

// The list without its gpu entries, other entries kept in order ("" when none is left).
std::string without_gpus(std::string_view tres);

// The GPU part of a native request. Counts of 0 mean "not given".
struct TresRequest {
  std::string_view per_job;     // --gpus
  std::string_view per_node;    // --gpus-per-node, --gres
  std::string_view per_socket;  // --gpus-per-socket
  std::string_view per_task;    // --gpus-per-task
  std::uint32_t nodes = 0;      // -N (minimum)
  std::uint32_t tasks = 0;      // -n
};

// Total GPUs the request asks for, nullopt when it asks for none. --gpus wins, then
// per node x nodes, then per task x tasks (a missing count is 1). Throws InputError for
// --gpus-per-socket, whose total depends on the nodes Slurm picks.
std::optional<std::uint64_t> requested_gpus(const TresRequest& request);

}  // namespace dl
