// Which checkpoints to remove after a save (and for `dl-ckpt prune`).
#pragma once

#include <dl/ckpt_types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dl::ckpt {

struct RetentionEntry {
  std::uint64_t step = 0;
  bool valid = false;  // passed verification; invalid ones never count as kept
  std::map<std::string, double> metrics;
};

// Throws dl::InputError for keep_best > 0 without a metric name.
void validate_retention(const Retention& policy);

// The steps to remove, ascending. With keep_last = 0 nothing is removed. Otherwise the
// kept set is the keep_last newest valid checkpoints, the keep_best best valid ones that
// have the metric (ties go to the newer), and always the newest valid one. Invalid
// checkpoints older than the newest valid one are removed (they can never be loaded);
// newer invalid ones are left for a human to look at.
std::vector<std::uint64_t> steps_to_remove(std::vector<RetentionEntry> entries,
                                           const Retention& policy);

}  // namespace dl::ckpt
