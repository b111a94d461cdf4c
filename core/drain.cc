#include "core/drain.h"

#include <fmt/format.h>

#include <cctype>

#include "core/error.h"
#include "core/parse.h"

namespace dl {
namespace {

constexpr std::size_t kMaxSteps = 64;

}  // namespace

std::string encode_node_record(const NodeRecord& r) {
  return fmt::format("culprit_steps={} drained={}\n", fmt::join(r.culprit_steps, ","),
                     r.drained ? 1 : 0);
}

NodeRecord decode_node_record(std::string_view text) {
  const auto fail = [&] {
    return InputError(fmt::format("node record '{}': expected 'culprit_steps=N,... drained=0|1'",
                                  text.substr(0, 100)));
  };
  std::string_view rest = text;
  if (!rest.empty() && rest.back() == '\n') rest.remove_suffix(1);
  constexpr std::string_view kSteps = "culprit_steps=";
  constexpr std::string_view kDrained = " drained=";
  const std::size_t mid = rest.find(kDrained);
  if (rest.substr(0, kSteps.size()) != kSteps || mid == std::string_view::npos) throw fail();
  NodeRecord r;
  const std::string_view flag = rest.substr(mid + kDrained.size());
  if (flag != "0" && flag != "1") throw fail();
  r.drained = flag == "1";
  std::string_view list = rest.substr(kSteps.size(), mid - kSteps.size());
  try {
    while (!list.empty()) {
      const std::size_t comma = list.find(',');
      if (r.culprit_steps.size() >= kMaxSteps) throw fail();
      r.culprit_steps.push_back(
          static_cast<std::uint32_t>(parse_uint("step", list.substr(0, comma), 0, UINT32_MAX)));
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
      if (comma != std::string_view::npos && list.empty()) throw fail();
    }
  } catch (const InputError&) {
    throw fail();
  }
  return r;
}

DrainDecision judge_step(const NodeRecord& record, std::uint32_t job, std::uint32_t step,
                         bool culprit, std::uint32_t drain_after) {
  DrainDecision d;
  d.record.drained = record.drained;
  if (!culprit) return d;
  // Steps in a row of the job: a step in between that ran elsewhere breaks the row too.
  if (!record.culprit_steps.empty() && record.culprit_steps.back() + 1 == step) {
    d.record.culprit_steps = record.culprit_steps;
  }
  d.record.culprit_steps.push_back(step);
  const std::size_t keep = drain_after > 0 ? drain_after : 1;
  while (d.record.culprit_steps.size() > keep) {
    d.record.culprit_steps.erase(d.record.culprit_steps.begin());
  }
  if (drain_after == 0 || record.drained || d.record.culprit_steps.size() < drain_after) return d;
  d.drain = true;
  d.record.drained = true;
  d.reason =
      fmt::format("slurm-dl: job {}: steps {} ended with this node as the culprit (dlrun exit {})",
                  job, fmt::join(d.record.culprit_steps, ","), kExitCulpritStep);
  return d;
}

DrainCheck check_drained_nodes(std::uint32_t job, int exit_code, std::string_view reply) {
  DrainCheck c;
  if (exit_code != 0) {
    c.why_not = fmt::format("sinfo exited with {}", exit_code);
    return c;
  }
  if (reply.size() > kMaxDrainedNodesReply) {
    c.why_not = fmt::format("sinfo's reply is over {} bytes", kMaxDrainedNodesReply);
    return c;
  }
  const std::string mark = fmt::format("slurm-dl: job {}:", job);
  while (!reply.empty()) {
    const std::size_t end = reply.find('\n');
    const std::string_view line = reply.substr(0, end);
    reply = end == std::string_view::npos ? std::string_view() : reply.substr(end + 1);
    const std::size_t bar = line.find('|');
    if (bar == 0 || bar == std::string_view::npos) {
      c.why_not = fmt::format("sinfo replied '{}', not '<node>|<reason>'", line.substr(0, 100));
      return c;
    }
    if (line.substr(bar + 1, mark.size()) == mark) {
      c.why_not = fmt::format("node {} was drained for job {} already", line.substr(0, bar), job);
      return c;
    }
  }
  c.may_drain = true;
  return c;
}

std::string node_record_name(std::string_view node, std::uint32_t job) {
  bool plain = !node.empty() && node.size() <= 255 && node.front() != '.';
  for (const char c : node) {
    plain =
        plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.');
  }
  if (!plain) throw InputError(fmt::format("'{}' is not a node name", node.substr(0, 100)));
  return fmt::format("{}.{}", node, job);
}

}  // namespace dl
