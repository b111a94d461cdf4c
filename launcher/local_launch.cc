#include "launcher/local_launch.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace dl {

std::vector<std::string> visible_gpu_list(std::string_view cuda_visible_devices) {
  std::vector<std::string> gpus;
  if (cuda_visible_devices == "NoDevFiles") return gpus;
  std::size_t start = 0;
  while (start <= cuda_visible_devices.size()) {
    const std::size_t comma =
        std::min(cuda_visible_devices.find(',', start), cuda_visible_devices.size());
    const std::string_view item = cuda_visible_devices.substr(start, comma - start);
    if (!item.empty()) gpus.emplace_back(item);
    start = comma + 1;
  }
  return gpus;
}

LaunchDecision decide_launch(const StepView& view) {
  LaunchDecision d;
  if (!view.in_step) {
    d.why = "not inside a step";
    return d;
  }
  if (!view.step_tasks || *view.step_tasks != 1) {
    d.why = view.step_tasks
                ? fmt::format("the step has {} tasks: each task is a rank", *view.step_tasks)
                : "the step's task count is unknown (no SLURM_STEP_NUM_TASKS)";
    return d;
  }
  if (view.task_pid && *view.task_pid == view.self_pid) {
    d.why = "dlrun is the step's task";
    return d;
  }
  d.mode = LaunchMode::local;
  const auto gpus = visible_gpu_list(view.visible_gpus.value_or(""));
  d.ranks = std::max<std::uint32_t>(1, static_cast<std::uint32_t>(gpus.size()));
  d.why = gpus.empty()
              ? std::string("inside a one-task step, no GPU visible: 1 local rank")
              : fmt::format("inside a one-task step: {} local rank{}, one per visible GPU ({})",
                            d.ranks, d.ranks == 1 ? "" : "s", fmt::join(gpus, ","));
  return d;
}

RankLayout local_layout(std::uint32_t rank, std::uint32_t ranks) {
  RankLayout l;
  l.rank = rank;
  l.world_size = ranks;
  l.local_rank = rank;
  l.local_world_size = ranks;
  l.node_rank = 0;
  return l;
}

EnvChanges local_rank_env(const std::vector<std::string>& base_env, bool on_terminal) {
  EnvChanges c;
  for (const auto& entry : base_env) {
    const std::string name = entry.substr(0, entry.find('='));
    if (name.rfind("PMIX_", 0) == 0) c.unset.push_back(name);
  }
  if (on_terminal) c.defaults.emplace_back("PYTHONUNBUFFERED", "1");
  return c;
}

int local_exit_code(const std::vector<int>& rank_codes) {
  if (rank_codes.empty()) return 0;
  if (rank_codes.front() != 0) return rank_codes.front();
  for (const int code : rank_codes) {
    if (code != 0) return code;
  }
  return 0;
}

}  // namespace dl
