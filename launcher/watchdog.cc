#include "launcher/watchdog.h"

#include <fmt/format.h>

#include <algorithm>

namespace dl {

Watchdog::Watchdog(std::chrono::milliseconds limit, std::uint32_t world_size)
    : limit_(limit), ranks_(world_size) {}

void Watchdog::report(std::uint32_t rank, std::int64_t step, Steady::time_point when) {
  if (rank >= ranks_.size() || step < 0) return;
  State& s = ranks_[rank];
  if (s.step == step) return;
  s.step = step;
  s.changed = when;
}

void Watchdog::busy(std::uint32_t rank, Steady::time_point when) {
  if (rank >= ranks_.size()) return;
  State& s = ranks_[rank];
  if (s.step >= 0 && when > s.changed) s.changed = when;
}

void Watchdog::exited(std::uint32_t rank) {
  if (rank < ranks_.size()) ranks_[rank].exited = true;
}

std::optional<Watchdog::Steady::time_point> Watchdog::next_check() const {
  std::optional<Steady::time_point> latest;
  for (const State& s : ranks_) {
    if (s.watched() && (!latest || s.changed > *latest)) latest = s.changed;
  }
  if (!latest) return std::nullopt;
  return *latest + limit_;
}

std::optional<Hang> Watchdog::check(Steady::time_point now) const {
  const auto when = next_check();
  if (!when || now < *when) return std::nullopt;
  Hang hang;
  std::int64_t lowest = -1;
  for (std::uint32_t r = 0; r < ranks_.size(); ++r) {
    const State& s = ranks_[r];
    RankStall rs{r, s.watched() ? s.step : -1, std::chrono::milliseconds(0)};
    if (s.watched()) {
      rs.idle = std::chrono::duration_cast<std::chrono::milliseconds>(now - s.changed);
      if (lowest < 0 || s.step < lowest) lowest = s.step;
    }
    hang.ranks.push_back(rs);
  }
  for (const RankStall& rs : hang.ranks) {
    if (rs.step >= 0 && rs.step == lowest) hang.stalled.push_back(rs);
  }
  // The longest idle first; the lower rank on a tie, so that the verdict is stable.
  std::stable_sort(hang.stalled.begin(), hang.stalled.end(),
                   [](const RankStall& a, const RankStall& b) { return a.idle > b.idle; });
  return hang;
}

std::string describe_hang(const Hang& hang, const std::vector<std::string>& nodes,
                          std::chrono::milliseconds limit) {
  const auto node_of = [&](std::uint32_t r) {
    return r < nodes.size() && !nodes[r].empty() ? nodes[r] : std::string("?");
  };
  const auto secs = [](std::chrono::milliseconds d) { return d.count() / 1000.0; };
  std::string out;
  if (!hang.stalled.empty()) {
    const RankStall& first = hang.stalled.front();
    out += fmt::format(
        "hang: no rank reported a step for {:.0f}s (--dl-watchdog); rank {} on {} stalled "
        "first, at step {}\n",
        secs(limit), first.rank, node_of(first.rank), first.step);
    std::string rest;
    for (std::size_t i = 1; i < hang.stalled.size(); ++i) {
      rest += fmt::format("{}{}@{}", rest.empty() ? "" : " ", hang.stalled[i].rank,
                          node_of(hang.stalled[i].rank));
    }
    if (!rest.empty()) out += fmt::format("also stalled at step {}: {}\n", first.step, rest);
  }
  out += "rank node last-step idle-seconds\n";
  for (const RankStall& rs : hang.ranks) {
    if (rs.step < 0) {
      out += fmt::format("{} {} none -\n", rs.rank, node_of(rs.rank));
    } else {
      out += fmt::format("{} {} {} {:.1f}\n", rs.rank, node_of(rs.rank), rs.step, secs(rs.idle));
    }
  }
  return out;
}

}  // namespace dl

namespace dl {

std::chrono::seconds collective_timeout_for(std::chrono::seconds watchdog) {
  // The watchdog fires up to one PROGRESS interval late, stack collection takes up to a
  // minute, and stopping every rank a few seconds more: twice the watchdog plus five
  // minutes leaves dlrun ample time to act first.
  return 2 * watchdog + std::chrono::minutes(5);
}

std::vector<std::pair<std::string, std::string>> collective_watchdog_defaults(
    std::chrono::seconds watchdog) {
  const std::string timeout = std::to_string(collective_timeout_for(watchdog).count());
  return {{"DL_COLLECTIVE_TIMEOUT", timeout},
          {"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", timeout},
          {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
          {"NCCL_ASYNC_ERROR_HANDLING", "1"}};
}

}  // namespace dl
