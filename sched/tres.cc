#include "sched/tres.h"

#include <fmt/format.h>

#include <vector>

#include "core/error.h"
#include "core/parse.h"

namespace dl {
namespace {

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = std::min(text.find(sep, start), text.size());
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// The fields of one entry after its optional "gres:"/"gres/" prefix, when it names gpu.
std::optional<std::vector<std::string_view>> gpu_fields(std::string_view entry) {
  if (entry.substr(0, 5) == "gres:" || entry.substr(0, 5) == "gres/") entry.remove_prefix(5);
  auto fields = split(entry, ':');
  if (fields.front() != "gpu") return std::nullopt;
  return fields;
}

bool all_digits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

}  // namespace

std::optional<std::uint64_t> gpus_in_tres(std::string_view tres) {
  if (tres.empty()) return std::nullopt;
  std::optional<std::uint64_t> total;
  for (const auto entry : split(tres, ',')) {
    const auto fields = gpu_fields(entry);
    if (!fields) continue;
    std::uint64_t count = 1;
    // gpu, gpu:N, gpu:TYPE, gpu:TYPE:N
    if (fields->size() > 3) {
      throw InputError(fmt::format("GPU request '{}': expected gpu[:type][:count]", entry));
    }
    if (fields->size() >= 2 && (fields->size() == 3 || all_digits(fields->back()))) {
      count = parse_uint(fmt::format("GPU request '{}'", entry), fields->back(), 0, 1u << 20);
    }
    total = total.value_or(0) + count;
  }
  return total;
}

std::string without_gpus(std::string_view tres) {
  std::string out;
  if (tres.empty()) return out;
  for (const auto entry : split(tres, ',')) {
    if (entry.empty() || gpu_fields(entry)) continue;
    if (!out.empty()) out += ',';
    out += entry;
  }
  return out;
}

std::optional<std::uint64_t> requested_gpus(const TresRequest& request) {
  if (gpus_in_tres(request.per_socket)) {
    throw InputError(
        "--gpus-per-socket: the total depends on the nodes Slurm picks; give only --dl-gpus");
  }
  if (const auto n = gpus_in_tres(request.per_job)) return n;
  if (const auto n = gpus_in_tres(request.per_node)) {
    return *n * std::max<std::uint64_t>(request.nodes, 1);
  }
  if (const auto n = gpus_in_tres(request.per_task)) {
    return *n * std::max<std::uint64_t>(request.tasks, 1);
  }
  return std::nullopt;
}

}  // namespace dl
