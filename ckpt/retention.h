// Which checkpoints to remove after a save (and for `dl-ckpt prune`).
#pragma once

#include <dl/ckpt_types.h>

#include <cstdint>
#include <functional>
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

// The same, with validity judged as resume judges it before anything goes. `entries`
// come from a cheap check (manifest and HDF5 metadata); when that would remove
// something, the checkpoints it calls valid are handed to `passes_resume_check` (every
// checksum, what dlrun's --resume-verify=full does) newest first until one passes, and
// those that fail count as invalid. So the newest checkpoint a restart would resume
// from is never removed, even when newer ones look fine but hold corrupt data, and
// nothing is removed when none passes.
std::vector<std::uint64_t> steps_to_remove(
    std::vector<RetentionEntry> entries, const Retention& policy,
    const std::function<bool(std::uint64_t step)>& passes_resume_check);

}  // namespace dl::ckpt
