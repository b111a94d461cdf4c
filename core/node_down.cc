#include "core/node_down.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/parse.h"

namespace dl {

NodeLine parse_node_line(std::string_view text) {
  const std::string_view line = text.substr(0, text.find('\n'));
  const auto fail = [&] {
    return InputError(
        fmt::format("sinfo line '{}': expected 'ADDRESS|PORT|STATE+...|'", line.substr(0, 200)));
  };
  std::vector<std::string_view> fields;
  std::string_view rest = line;
  while (!rest.empty()) {
    const std::size_t bar = rest.find('|');
    if (bar == std::string_view::npos) throw fail();
    fields.push_back(rest.substr(0, bar));
    rest.remove_prefix(bar + 1);
  }
  if (fields.size() != 3 || fields[0].empty() || fields[2].empty()) throw fail();
  NodeLine n;
  n.address = std::string(fields[0]);
  try {
    n.port = static_cast<std::uint16_t>(parse_uint("port", fields[1], 1, 65535));
  } catch (const InputError&) {
    throw fail();
  }
  std::string_view states = fields[2];
  while (!states.empty()) {
    const std::size_t plus = states.find('+');
    const std::string_view s = states.substr(0, plus);
    if (s.empty()) throw fail();
    n.states.emplace_back(s);
    if (plus == std::string_view::npos) break;
    states.remove_prefix(plus + 1);
    if (states.empty()) throw fail();
  }
  return n;
}

bool known_down(const NodeLine& node) {
  for (const auto& s : node.states) {
    if (s == "down") return true;
  }
  return false;
}

ProbeVerdict judge_probes(const std::vector<net::Reach>& probes) {
  if (probes.empty()) return ProbeVerdict::undecided;
  const net::Reach last = probes.back();
  if (last == net::Reach::silent) return ProbeVerdict::undecided;
  int run = 0;
  for (auto it = probes.rbegin(); it != probes.rend() && *it == last; ++it) ++run;
  if (last == net::Reach::answered) {
    return run >= kAliveAfterAnswers ? ProbeVerdict::alive : ProbeVerdict::undecided;
  }
  return run >= kDeadAfterRefusals ? ProbeVerdict::dead : ProbeVerdict::undecided;
}

std::string batch_host_down_reason(std::uint32_t job, const NodeLine& node, std::string_view from,
                                   int tries) {
  return fmt::format(
      "slurm-dl: job {}: batch host lost the job's ranks and its slurmd ({}:{}) refused {} {} "
      "times",
      job, node.address, node.port, from, tries);
}

}  // namespace dl
