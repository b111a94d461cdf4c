#include "ckpt/retention.h"

#include <algorithm>
#include <set>

#include "core/error.h"

namespace dl::ckpt {

void validate_retention(const Retention& policy) {
  if (policy.keep_best > 0 && policy.metric.empty()) {
    throw InputError("keeping the best checkpoints needs the name of the metric to rank them by");
  }
}

std::vector<std::uint64_t> steps_to_remove(std::vector<RetentionEntry> entries,
                                           const Retention& policy) {
  validate_retention(policy);
  if (policy.keep_last == 0) return {};
  std::sort(entries.begin(), entries.end(),
            [](const RetentionEntry& a, const RetentionEntry& b) { return a.step > b.step; });
  std::vector<const RetentionEntry*> valid;
  for (const RetentionEntry& e : entries) {
    if (e.valid) valid.push_back(&e);
  }
  if (valid.empty()) return {};

  std::set<std::uint64_t> keep;
  for (std::size_t i = 0; i < valid.size() && i < policy.keep_last; ++i) {
    keep.insert(valid[i]->step);
  }
  std::vector<const RetentionEntry*> ranked;
  for (const RetentionEntry* e : valid) {
    if (e->metrics.count(policy.metric)) ranked.push_back(e);
  }
  // Stable on the newest-first order, so that ties go to the newer checkpoint.
  std::stable_sort(ranked.begin(), ranked.end(),
                   [&](const RetentionEntry* a, const RetentionEntry* b) {
                     const double x = a->metrics.at(policy.metric);
                     const double y = b->metrics.at(policy.metric);
                     return policy.higher_is_better ? x > y : x < y;
                   });
  for (std::size_t i = 0; i < ranked.size() && i < policy.keep_best; ++i) {
    keep.insert(ranked[i]->step);
  }
  keep.insert(valid.front()->step);

  const std::uint64_t newest_valid = valid.front()->step;
  std::vector<std::uint64_t> remove;
  for (const RetentionEntry& e : entries) {
    if (e.valid ? !keep.count(e.step) : e.step < newest_valid) remove.push_back(e.step);
  }
  std::sort(remove.begin(), remove.end());
  return remove;
}

std::vector<std::uint64_t> steps_to_remove(
    std::vector<RetentionEntry> entries, const Retention& policy,
    const std::function<bool(std::uint64_t step)>& passes_resume_check) {
  if (steps_to_remove(entries, policy).empty()) return {};
  std::sort(entries.begin(), entries.end(),
            [](const RetentionEntry& a, const RetentionEntry& b) { return a.step > b.step; });
  for (RetentionEntry& e : entries) {
    if (!e.valid) continue;
    if (passes_resume_check(e.step)) break;
    e.valid = false;
  }
  return steps_to_remove(std::move(entries), policy);
}

}  // namespace dl::ckpt
