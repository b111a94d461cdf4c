#include "sched/plugins/controller.h"

#include <fmt/format.h>

#include <cstring>
#include <mutex>

namespace dl::sched {

EnvLookup env_of(char** env, std::uint32_t size) { return spank_env_lookup(env, size); }

std::optional<Spec> spec_of(const job_record_t* job) {
  return spank_env_spec(job->spank_job_env, job->spank_job_env_size);
}

Capacity capacity_of(const part_record_t* part) {
  Capacity c;
  if (!part || !part->node_bitmap) return c;
  // Node index in the table -> index in the partition.
  std::vector<std::int64_t> local(node_record_count, -1);
  node_record_t* node = nullptr;
  for (int i = 0; (node = next_node(&i)); ++i) {
    if (!bit_test(part->node_bitmap, node->index)) continue;
    local[node->index] = static_cast<std::int64_t>(c.node_gpus.size());
    c.node_gpus.push_back(static_cast<std::uint32_t>(
        gres_node_config_cnt(node->gres_list, const_cast<char*>("gpu"))));
  }
  for (bitstr_t* nodes : leaf_switch_nodes()) {
    std::vector<std::uint32_t> leaf;
    for (int n = 0; n < node_record_count; ++n) {
      if (local[n] >= 0 && bit_test(nodes, n)) {
        leaf.push_back(static_cast<std::uint32_t>(local[n]));
      }
    }
    if (!leaf.empty()) c.leaf_switches.push_back(std::move(leaf));
  }
  return c;
}

namespace {
// Calls f with the data of every gpu entry of a node's or a job's GRES list.
template <typename State, typename F>
void for_each_gpu(SlurmList gres, F&& f) {
  if (!gres) return;
  SlurmListIterator it = list_iterator_create(gres);
  while (auto* state = static_cast<gres_state_t*>(list_next(it))) {
    if (state->gres_name && std::strcmp(state->gres_name, "gpu") == 0 && state->gres_data) {
      f(*static_cast<const State*>(state->gres_data));
    }
  }
  list_iterator_destroy(it);
}

std::uint32_t clamp32(std::uint64_t n) {
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(n, UINT32_MAX));
}
}  // namespace

std::uint32_t allocated_gpus(const job_record_t* job) {
  std::uint64_t gpus = 0;
  for_each_gpu<gres_job_state_t>(job->gres_list_alloc,
                                 [&](const gres_job_state_t& g) { gpus += g.total_gres; });
  return clamp32(gpus);
}

std::vector<FreeNode> free_nodes() {
  std::vector<FreeNode> free(static_cast<std::size_t>(node_record_count));
  node_record_t* node = nullptr;
  for (int i = 0; (node = next_node(&i)); ++i) {
    if (!avail_node_bitmap || !bit_test(avail_node_bitmap, node->index)) continue;
    if (!share_node_bitmap || !bit_test(share_node_bitmap, node->index)) continue;
    if (IS_NODE_DRAIN(node) || IS_NODE_NO_RESPOND(node) || IS_NODE_POWERED_DOWN(node)) continue;
    FreeNode f;
    std::uint64_t gpus = 0;
    for_each_gpu<gres_node_state_t>(node->gres_list, [&](const gres_node_state_t& g) {
      if (g.gres_cnt_avail > g.gres_cnt_alloc) gpus += g.gres_cnt_avail - g.gres_cnt_alloc;
    });
    f.gpus = clamp32(gpus);
    // The node's CPUs, not what is free of them: the allocated count lives in the select
    // plugin's node data, which only a holder of the node write lock may refresh.
    f.cpus = node->cpus_efctv;
    free[static_cast<std::size_t>(node->index)] = f;
  }
  return free;
}

std::uint32_t requested_gpus_per_node(const job_record_t* job) {
  std::uint64_t gpus = 0;
  for_each_gpu<gres_job_state_t>(job->gres_list_req, [&](const gres_job_state_t& g) {
    if (g.gres_per_node != NO_VAL64) gpus += g.gres_per_node;
  });
  return clamp32(gpus);
}

double run_seconds(const job_record_t* job, std::time_t now) {
  if (job->start_time == 0) return 0;
  return std::max<double>(0, static_cast<double>(now - job->start_time - job->tot_sus_time));
}

std::optional<std::chrono::seconds> time_limit(std::uint32_t minutes, const part_record_t* part) {
  if (minutes == NO_VAL && part) {
    minutes = part->default_time != NO_VAL ? part->default_time : part->max_time;
  }
  if (minutes == NO_VAL || minutes == INFINITE) return std::nullopt;
  return std::chrono::seconds(std::int64_t{minutes} * 60);
}

PriorityParams site_params() {
  static std::mutex lock;
  static PriorityParams params;
  static std::optional<std::string> parsed;
  const std::lock_guard<std::mutex> hold(lock);
  // Keyed on the text, not on slurm_conf.last_update: that has whole seconds, and two
  // reconfigurations within one second left the first one's parameters in force.
  const char* text = slurm_conf.site_factor_params ? slurm_conf.site_factor_params : "";
  if (!parsed || *parsed != text) {
    params = parse_priority_params(text);
    parsed = text;
  }
  return params;
}

bool site_factor_is_dl() {
  return slurm_conf.site_factor_plugin &&
         std::strcmp(slurm_conf.site_factor_plugin, "site_factor/dl") == 0;
}

}  // namespace dl::sched
