#include "launcher/recovery.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "core/parse.h"
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

namespace {

// The payload of a control line "WORD KEY PAYLOAD" whose KEY is `key`.
std::optional<std::string_view> keyed_payload(std::string_view line, std::string_view word,
                                              std::string_view key) {
  if (line.substr(0, word.size()) != word) return std::nullopt;
  line.remove_prefix(word.size());
  const auto space = line.find(' ');
  if (space == std::string_view::npos || !same_secret(line.substr(0, space), key)) {
    return std::nullopt;
  }
  return line.substr(space + 1);
}

}  // namespace

std::optional<std::string> parse_lost_node(std::string_view line, std::string_view key) {
  const auto node = keyed_payload(line, "LOST ", key);
  if (!node || !valid_node_name(*node)) return std::nullopt;
  return std::string(*node);
}

std::string format_culprit(std::string_view key, const Culprit& culprit) {
  return fmt::format("CULPRIT {} {}\n", key, encode_culprit(culprit));
}

std::optional<Culprit> parse_culprit(std::string_view line, std::string_view key) {
  const auto entry = keyed_payload(line, "CULPRIT ", key);
  if (!entry) return std::nullopt;
  auto culprit = decode_culprit(*entry);
  if (!culprit || culprit->node.empty()) return std::nullopt;
  return culprit;
}

std::string format_run_end(std::string_view key, int code) {
  return fmt::format("ENDED {} {}\n", key, code);
}

std::optional<int> parse_run_end(std::string_view line, std::string_view key) {
  const auto payload = keyed_payload(line, "ENDED ", key);
  if (!payload) return std::nullopt;
  try {
    return static_cast<int>(parse_uint("exit code", *payload, 0, 255));
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
