#include "launcher/agreement.h"

#include <algorithm>

namespace dl {

std::int64_t agree_on_step(const std::vector<StepReport>& reports) {
  std::int64_t target = -1;
  bool any = false;
  for (const auto& r : reports) {
    if (r.step < 0) continue;
    any = true;
    target = std::max(target, r.frozen ? r.step : r.step + 1);
  }
  return any ? target : -1;
}

bool answer_round_now(bool frozen, std::int64_t step, std::chrono::steady_clock::duration waited) {
  return frozen || step < 0 || waited >= kFreezeWait;
}

std::chrono::steady_clock::time_point next_periodic_round(
    std::chrono::steady_clock::time_point origin, std::chrono::steady_clock::time_point ended,
    std::chrono::steady_clock::duration every) {
  const auto earliest = ended + every / 2 - origin;
  const auto k = std::max<std::int64_t>(1, (earliest.count() + every.count() - 1) / every.count());
  return origin + k * every;
}

CheckpointRound::CheckpointRound(std::uint64_t seq, std::uint32_t world_size, bool stop)
    : seq_(seq),
      stop_(stop),
      reported_(world_size, false),
      reports_(world_size),
      done_(world_size, false) {}

void CheckpointRound::report(std::uint32_t rank, StepReport r) {
  if (rank >= reported_.size() || reported_[rank]) return;
  reported_[rank] = true;
  reports_[rank] = r;
}

bool CheckpointRound::reports_complete() const {
  return std::all_of(reported_.begin(), reported_.end(), [](bool b) { return b; });
}

std::int64_t CheckpointRound::target() const { return agree_on_step(reports_); }

bool CheckpointRound::no_client_api() const {
  return std::all_of(reports_.begin(), reports_.end(),
                     [](const StepReport& r) { return r.step == kNoClientApi; });
}

void CheckpointRound::done(std::uint32_t rank) {
  if (rank < done_.size()) done_[rank] = true;
}

void CheckpointRound::exited(std::uint32_t rank) {
  if (rank >= done_.size()) return;
  if (!reported_[rank]) {
    reported_[rank] = true;
    reports_[rank] = StepReport{false, kNoClientApi};
  }
  done_[rank] = true;
}

bool CheckpointRound::failed_to_checkpoint(std::uint32_t rank, int code, int stop_signal) const {
  if (!stop_ || code == 0 || rank >= done_.size() || done_[rank]) return false;
  if (!reported_[rank] || reports_[rank].step == kNoClientApi) return false;
  return stop_signal == 0 || code != 128 + stop_signal;
}

bool CheckpointRound::complete() const { return outstanding() == 0; }

std::uint32_t CheckpointRound::outstanding() const {
  return static_cast<std::uint32_t>(std::count(done_.begin(), done_.end(), false));
}

}  // namespace dl
