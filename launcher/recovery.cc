#include "launcher/recovery.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "launcher/control.h"

namespace dl {

StepEnd classify_step_exit(int code) {
  if (code == 0) return StepEnd::completed;
  if (code == 75 || code == 143) return StepEnd::stopped;
  return StepEnd::failed;
}

RecoveryPlan plan_recovery(const StepShape& shape, const std::vector<std::string>& dead,
                           std::optional<RankRange> elastic, std::string_view what) {
  RecoveryPlan plan;
  plan.shape = shape;
  for (const auto& n : shape.nodes) {
    if (std::find(dead.begin(), dead.end(), n) != dead.end()) plan.dead.push_back(n);
  }
  if (plan.dead.empty()) {
    plan.in_allocation = true;
    plan.why = "restarting on the same nodes";
    return plan;
  }
  plan.shape.nodes.clear();
  for (const auto& n : shape.nodes) {
    if (std::find(plan.dead.begin(), plan.dead.end(), n) == plan.dead.end()) {
      plan.shape.nodes.push_back(n);
    }
  }
  const std::string gone = fmt::format("{}", fmt::join(plan.dead, ","));
  const auto ranks = static_cast<std::uint64_t>(plan.shape.nodes.size()) * shape.tasks_per_node;
  if (plan.shape.nodes.empty()) {
    plan.why = fmt::format("node {} {} and no node is left: requeued", gone, what);
  } else if (!elastic) {
    plan.why = fmt::format(
        "node {} {} and the job is not elastic (--dl-elastic), so it cannot run on {} "
        "rank(s): requeued without it",
        gone, what, ranks);
  } else if (ranks < elastic->min || ranks > elastic->max) {
    plan.why = fmt::format(
        "node {} {} and {} rank(s) on the {} node(s) left are outside --dl-elastic={}:{}: "
        "requeued without it",
        gone, what, ranks, plan.shape.nodes.size(), elastic->min, elastic->max);
  } else {
    plan.in_allocation = true;
    plan.why = fmt::format("node {} {}: restarting on the {} node(s) left with {} rank(s)", gone,
                           what, plan.shape.nodes.size(), ranks);
  }
  return plan;
}

std::string format_lost_node(std::string_view key, std::string_view node) {
  return fmt::format("LOST {} {}\n", key, node);
}

std::optional<std::string> parse_lost_node(std::string_view line, std::string_view key) {
  constexpr std::string_view kWord = "LOST ";
  if (line.substr(0, kWord.size()) != kWord) return std::nullopt;
  line.remove_prefix(kWord.size());
  const auto space = line.find(' ');
  if (space == std::string_view::npos || !same_secret(line.substr(0, space), key)) {
    return std::nullopt;
  }
  const std::string_view node = line.substr(space + 1);
  if (node.empty() || node.size() > 255) return std::nullopt;
  for (const char c : node) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return std::nullopt;
    }
  }
  return std::string(node);
}

std::string format_culprit(std::string_view key, const Culprit& culprit) {
  // The history's encoding of one culprit: NODE/RANK/KIND.
  RestartHistory h;
  h.culprits.push_back(culprit);
  const std::string text = encode_history(h);
  const std::size_t at = text.find("culprits=") + 9;
  return fmt::format("CULPRIT {} {}\n", key, text.substr(at, text.size() - at - 1));
}

std::optional<Culprit> parse_culprit(std::string_view line, std::string_view key) {
  constexpr std::string_view kWord = "CULPRIT ";
  if (line.substr(0, kWord.size()) != kWord) return std::nullopt;
  line.remove_prefix(kWord.size());
  const auto space = line.find(' ');
  if (space == std::string_view::npos || !same_secret(line.substr(0, space), key)) {
    return std::nullopt;
  }
  const std::string_view entry = line.substr(space + 1);
  if (entry.empty() || entry.size() > 300 || entry.find_first_of(", ") != std::string_view::npos) {
    return std::nullopt;
  }
  try {
    const RestartHistory h = decode_history(fmt::format("failures=0 stalled=0 culprits={}", entry));
    if (h.culprits.size() != 1 || h.culprits.front().node.empty()) return std::nullopt;
    return h.culprits.front();
  } catch (const InputError&) {
    return std::nullopt;
  }
}

std::vector<std::string> step_shape_options(const StepShape& shape) {
  const auto n = shape.nodes.size();
  return {fmt::format("-N{}", n), fmt::format("-n{}", n * shape.tasks_per_node),
          fmt::format("--ntasks-per-node={}", shape.tasks_per_node),
          fmt::format("--nodelist={}", fmt::join(shape.nodes, ","))};
}

std::optional<std::uint32_t> first_node_tasks(const std::string& text) {
  std::size_t i = 0;
  std::uint64_t v = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    v = v * 10 + static_cast<std::uint64_t>(text[i] - '0');
    if (v > 1'000'000) return std::nullopt;
    ++i;
  }
  if (i == 0 || v == 0) return std::nullopt;
  if (i < text.size() && text[i] != '(' && text[i] != ',') return std::nullopt;
  return static_cast<std::uint32_t>(v);
}

}  // namespace dl
