// The one place that includes slurmctld's private headers (from the configured Slurm
// source of exactly the installed version) and the one place where the supported Slurm
// releases differ for the controller plugins; configure says which case holds (-D flags
// in SLURM_SRC_CPPFLAGS). They are C, so they are wrapped in extern "C".
// src/common/slurm_xlator.h is deliberately not included: slurmctld exports Slurm's
// functions under their plain names, and its object-like `#define error slurm_error`
// would rename every C++ identifier called `error`.
#pragma once

#include <cstdint>
#include <vector>

// 24.11's src/common/extra_constraints.h (included by slurmctld.h) names a struct member
// `operator`, a keyword in C++: renamed while Slurm's headers are read.
#define operator dl_slurm_operator
extern "C" {
#include "src/common/list.h"
#include "src/common/log.h"
#include "src/common/node_conf.h"
#include "src/common/xmalloc.h"
#include "src/common/xstring.h"
#include "src/slurmctld/job_scheduler.h"
#include "src/slurmctld/locks.h"
#include "src/slurmctld/slurmctld.h"
// After slurmctld.h, which it needs.
#include "src/slurmctld/acct_policy.h"
#if HAVE_SLURM_JOB_STATE_REASON_STRING
#include "src/common/job_state_reason.h"
#endif
#include "src/slurmctld/state_save.h"
// 23.02 moved the plugin interfaces from src/common and src/slurmctld to src/interfaces.
#ifdef DL_SLURM_INTERFACES
#include "src/interfaces/gres.h"
#include "src/interfaces/preempt.h"
#include "src/interfaces/topology.h"
#else
#include "src/common/gres.h"
#include "src/common/slurm_topology.h"
#include "src/slurmctld/preempt.h"
#endif
}
#undef operator

// Defines slurmctld's job_modify hook as a call of IMPL(job_desc, job, err_msg). Since
// 23.02 the hook has a message for the user (err_msg, xmalloc'd); before, IMPL gets null.
#ifdef DL_SLURM_JOB_MODIFY_MSG
#define DL_DEFINE_JOB_MODIFY(IMPL)                                                 \
  extern "C" int job_modify(job_desc_msg_t* job_desc, job_record_t* job, uint32_t, \
                            char** err_msg) {                                      \
    return IMPL(job_desc, job, err_msg);                                           \
  }
#else
#define DL_DEFINE_JOB_MODIFY(IMPL)                                                   \
  extern "C" int job_modify(job_desc_msg_t* job_desc, job_record_t* job, uint32_t) { \
    return IMPL(job_desc, job, nullptr);                                             \
  }
#endif

namespace dl::sched {

// 23.11 renamed the list handles (List, ListIterator are gone in 24.11).
#ifdef DL_SLURM_LIST_T
using SlurmList = list_t*;
using SlurmListIterator = list_itr_t*;
#else
using SlurmList = List;
using SlurmListIterator = ListIterator;
#endif

// The GPUs per node of a job as its tres_per_node writes them (gres:gpu:N before 23.02,
// gres/gpu:N since, as sbatch --gpus-per-node writes them).
#ifdef DL_SLURM_TRES_SLASH
inline constexpr char kGpuTres[] = "gres/gpu";
#else
inline constexpr char kGpuTres[] = "gres:gpu";
#endif

// The name of a pending reason (24.05 renamed Slurm's function and moved it).
inline const char* reason_name(job_state_reason reason) {
#if HAVE_SLURM_JOB_STATE_REASON_STRING
  return job_state_reason_string(reason);
#else
  return job_reason_string(reason);
#endif
}

// The node bitmaps of the leaf switches of topology/tree (none for another topology
// plugin); owned by Slurm, valid while the caller holds the node read lock.
inline std::vector<bitstr_t*> leaf_switch_nodes() {
  std::vector<bitstr_t*> leaves;
#ifdef DL_SLURM_INTERFACES
  // In 24.11 the switch table belongs to the topology/tree plugin. Its records come
  // through topology_g_get: a dynamic_plugin_data_t holding that plugin's
  // topoinfo_tree_t (src/plugins/topology/tree/topology_tree.c, which declares it just
  // so: a count, then topo_info_t records from slurm.h), and the node bitmap of a
  // switch through topology_g_get_bitmap.
  if (topology_get_plugin_id() != TOPOLOGY_PLUGIN_TREE) return leaves;
  struct TreeInfo {
    std::uint32_t record_count;
    topo_info_t* topo_array;
  };
  dynamic_plugin_data_t* info = nullptr;
  if (topology_g_get(TOPO_DATA_TOPOLOGY_PTR, &info) != SLURM_SUCCESS || !info) return leaves;
  if (const auto* tree = static_cast<const TreeInfo*>(info->data)) {
    for (std::uint32_t s = 0; s < tree->record_count; ++s) {
      const topo_info_t& sw = tree->topo_array[s];
      if (sw.level != 0) continue;
      if (bitstr_t* nodes = topology_g_get_bitmap(sw.name)) leaves.push_back(nodes);
    }
  }
  topology_g_topology_free(info);
#else
  for (int s = 0; s < switch_record_cnt; ++s) {
    const switch_record_t& sw = switch_record_table[s];
    if (sw.level == 0 && sw.node_bitmap) leaves.push_back(sw.node_bitmap);
  }
#endif
  return leaves;
}

}  // namespace dl::sched
