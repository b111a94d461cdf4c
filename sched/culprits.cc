#include "sched/culprits.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace dl::sched {
namespace {

bool contains(const std::vector<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

const char* kind(bool hang) { return hang ? "hang" : "failure"; }

}  // namespace

bool valid_node_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

std::optional<VerifiedFailure> verify_claim(const CulpritClaim& claim, const RunRecord& record) {
  if (!valid_node_name(claim.node)) return std::nullopt;
  if (claim.job_id != record.job_id || claim.run != record.run) return std::nullopt;
  if (!contains(record.nodes, claim.node)) return std::nullopt;
  VerifiedFailure f;
  f.job_id = claim.job_id;
  f.run = claim.run;
  f.node = claim.node;
  f.hang = claim.hang;
  if (contains(record.not_responding, claim.node)) {
    f.evidence = fmt::format("{} stopped responding in run {}", claim.node, claim.run);
  } else if (contains(record.failed_on, claim.node)) {
    f.evidence = fmt::format("a step of run {} ended abnormally on {}", claim.run, claim.node);
  } else {
    return std::nullopt;
  }
  return f;
}

std::string drain_reason(const VerifiedFailure& older, const VerifiedFailure& newer) {
  return fmt::format("slurm-dl: job {}: {} ({}); {} ({})", newer.job_id, older.evidence,
                     kind(older.hang), newer.evidence, kind(newer.hang));
}

std::optional<DrainOrder> CulpritHistory::record(const VerifiedFailure& f) {
  auto it = last_.find(f.job_id);
  if (it == last_.end()) {
    last_.emplace(f.job_id, Last{std::nullopt, f, false});
    return std::nullopt;
  }
  Last& l = it->second;
  if (f.run < l.newer.run) return std::nullopt;  // late news of an older run
  if (f.run == l.newer.run) {
    l.newer = f;
  } else {
    l.older = l.newer;
    l.newer = f;
    l.drained = false;
  }
  if (!l.older || l.drained || l.older->node != l.newer.node) return std::nullopt;
  l.drained = true;
  return DrainOrder{l.newer.node, drain_reason(*l.older, l.newer)};
}

void CulpritHistory::forget(std::uint32_t job_id) { last_.erase(job_id); }

}  // namespace dl::sched
