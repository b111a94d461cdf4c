#include "launcher/slurm_job.h"

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "core/error.h"
#include "core/log.h"
#include "core/user_db.h"
#include "launcher/slurm_api.h"
#include "launcher/status.h"

namespace dl::slurm {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw SystemError(fmt::format("couldn't {}: {}", what, slurm_strerror(errno)));
}

struct JobInfoMsgDeleter {
  void operator()(job_info_msg_t* m) const noexcept { slurm_free_job_info_msg(m); }
};
struct NodeInfoMsgDeleter {
  void operator()(node_info_msg_t* m) const noexcept { slurm_free_node_info_msg(m); }
};
struct CtlConfDeleter {
  void operator()(slurm_conf_t* c) const noexcept { slurm_free_ctl_conf(c); }
};
struct HostlistDeleter {
  void operator()(hostlist* h) const noexcept { slurm_hostlist_destroy(h); }
};

// slurm_update_job2 on this job (array task), with the fields `set` fills in (pointers
// into strings that outlive the call: libslurm only reads them). Returns Slurm's code.
template <typename Set>
int update_job_rc(const JobRef& job, Set&& set) {
  init();
  job_desc_msg_t desc;
  slurm_init_job_desc_msg(&desc);
  std::string id = job.to_string();
  desc.job_id_str = id.data();
  set(desc);
  // Right after a requeue slurmctld answers "the DB index is being set, try again in a
  // bit" for a moment (as scontrol does, try again for up to 5 s). slurmctld itself
  // waits 5 s before it answers so, and without slurmdbd (AccountingStorageType=none)
  // a job that was resized keeps that answer for good: one more try only.
  for (int attempt = 0;; ++attempt) {
    job_array_resp_msg_t* resp = nullptr;
    const int rc = slurm_update_job2(&desc, &resp);
    // With an array task's id the answer lists the task's own code.
    int task_rc = SLURM_SUCCESS;
    if (resp) {
      for (std::uint32_t i = 0; i < resp->job_array_count; ++i) {
        if (resp->error_code[i] != SLURM_SUCCESS) task_rc = static_cast<int>(resp->error_code[i]);
      }
      slurm_free_job_array_resp(resp);
    }
    if (rc != SLURM_SUCCESS && task_rc == SLURM_SUCCESS) task_rc = errno;
    if (!setting_db_index(task_rc) || attempt == 1) return task_rc;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// The same, throwing; `what` is the action for the message, e.g. "exclude node n2 from".
template <typename Set>
void update_job(const JobRef& job, const std::string& what, Set&& set) {
  const int rc = update_job_rc(job, std::forward<Set>(set));
  if (rc != SLURM_SUCCESS) {
    throw SystemError(
        fmt::format("couldn't {} job {}: {}", what, job.to_string(), slurm_strerror(rc)));
  }
}

}  // namespace

void init() {
  static std::once_flag once;
  std::call_once(once, [] { slurm_init(nullptr); });
}

JobInfo load_job(const JobRef& job) {
  init();
  job_info_msg_t* raw = nullptr;
  if (slurm_load_job(&raw, job.job_id, SHOW_DETAIL) != SLURM_SUCCESS) {
    fail(fmt::format("load job {}", job.to_string()));
  }
  const std::unique_ptr<job_info_msg_t, JobInfoMsgDeleter> msg(raw);
  // The id of an array's last task is also the array's id: then every task comes back.
  for (std::uint32_t i = 0; i < msg->record_count; ++i) {
    const slurm_job_info_t& j = msg->job_array[i];
    if (j.job_id != job.job_id) continue;
    JobInfo info;
    // Once the job is cancelled or completing, end_time is when it ended: no deadline.
    const bool running = (j.job_state & JOB_STATE_BASE) == JOB_RUNNING;
    if (running && j.time_limit != INFINITE && j.time_limit != NO_VAL && j.end_time > 0) {
      info.end = WallClock::from_time_t(j.end_time);
    }
    info.comment = j.comment ? j.comment : "";
    info.cancelled = (j.job_state & JOB_STATE_BASE) == JOB_CANCELLED;
    info.batch = j.batch_flag != 0;
    info.running = running;
    if (j.preempt_time != 0) info.preempted_at = WallClock::from_time_t(j.preempt_time);
    info.nodes = j.nodes ? j.nodes : "";
    info.batch_host = j.batch_host ? j.batch_host : "";
    if (j.submit_time > 0) info.submitted = WallClock::from_time_t(j.submit_time);
    if (running && j.start_time > 0) info.started = WallClock::from_time_t(j.start_time);
    if (info.batch) {
      char path[4096] = {};
      slurm_get_job_stdout(path, sizeof path, const_cast<slurm_job_info_t*>(&j));
      info.std_out = path;
      path[0] = '\0';
      slurm_get_job_stderr(path, sizeof path, const_cast<slurm_job_info_t*>(&j));
      info.std_err = path;
    }
    return info;
  }
  throw SystemError(
      fmt::format("couldn't load job {}: not in slurmctld's answer", job.to_string()));
}

NodeInfo load_node(const std::string& node) {
  init();
  node_info_msg_t* raw = nullptr;
  if (slurm_load_node_single(&raw, const_cast<char*>(node.c_str()), SHOW_ALL) != SLURM_SUCCESS) {
    fail(fmt::format("load node {}", node));
  }
  const std::unique_ptr<node_info_msg_t, NodeInfoMsgDeleter> msg(raw);
  for (std::uint32_t i = 0; i < msg->record_count; ++i) {
    const node_info_t& n = msg->node_array[i];
    if (n.name == nullptr || node != n.name) continue;
    NodeInfo info;
    info.address = n.node_addr ? n.node_addr : node;
    info.port = n.port;
    info.not_responding = (n.node_state & NODE_STATE_BASE) == NODE_STATE_DOWN ||
                          (n.node_state & NODE_STATE_NO_RESPOND);
    return info;
  }
  throw SystemError(fmt::format("couldn't load node {}: not in slurmctld's answer", node));
}

void remove_node(const JobRef& job, const std::string& nodes, const std::string& node) {
  const std::unique_ptr<hostlist, HostlistDeleter> all(slurm_hostlist_create(nodes.c_str()));
  const std::unique_ptr<hostlist, HostlistDeleter> rest(slurm_hostlist_create(nullptr));
  if (!all || !rest) throw SystemError(fmt::format("couldn't parse the node list '{}'", nodes));
  while (char* host = slurm_hostlist_shift(all.get())) {
    if (node != host) slurm_hostlist_push_host(rest.get(), host);
    std::free(host);
  }
  if (slurm_hostlist_count(rest.get()) == 0) {
    throw SystemError(fmt::format("couldn't remove node {} from job {}: it is its only node", node,
                                  job.to_string()));
  }
  // slurm_hostlist_ranged_string_malloc went away in 23.02; this one is in every release.
  std::string left(64, '\0');
  while (slurm_hostlist_ranged_string(rest.get(), left.size(), left.data()) < 0) {
    left.resize(left.size() * 2);
  }
  left.resize(std::strlen(left.c_str()));
  update_job(job, fmt::format("remove node {} from", node),
             [&](job_desc_msg_t& desc) { desc.req_nodes = left.data(); });
  log(LogLevel::info, "removed node {} from job {} (now on {})", node, job.to_string(), left);
}

void exclude_failed_node(const JobRef& job, const std::string& node, bool release) {
  init();
  const std::string id = job.to_string();
  job_info_msg_t* raw = nullptr;
  if (slurm_load_job(&raw, job.job_id, SHOW_DETAIL) != SLURM_SUCCESS) fail("load job " + id);
  const std::unique_ptr<job_info_msg_t, JobInfoMsgDeleter> msg(raw);
  std::string excluded = node;
  for (std::uint32_t i = 0; i < msg->record_count; ++i) {
    const slurm_job_info_t& j = msg->job_array[i];
    if (j.job_id == job.job_id && j.exc_nodes && *j.exc_nodes) {
      excluded = fmt::format("{},{}", j.exc_nodes, node);
    }
  }
  // slurmctld applies ExcNodeList before the priority: when the exclusion fails the job
  // is not released. A job that was resized accepts no update until its requeue is
  // complete (without slurmdbd; slurmctld waits 5 s before each such answer): the job is
  // held meanwhile, so waiting costs nothing but time.
  const auto set = [&](job_desc_msg_t& desc) {
    desc.exc_nodes = excluded.data();
    if (release) desc.priority = INFINITE;
  };
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int rc = update_job_rc(job, set);
  while (setting_db_index(rc) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    rc = update_job_rc(job, set);
  }
  if (rc != SLURM_SUCCESS) {
    throw SystemError(
        fmt::format("couldn't exclude node {} from job {}: {}", node, id, slurm_strerror(rc)));
  }
  log(LogLevel::info, "job {} excludes node {}{}", id, node, release ? " and is released" : "");
}

std::vector<std::string> expand_nodes(const std::string& nodes) {
  init();
  const std::unique_ptr<hostlist, HostlistDeleter> all(slurm_hostlist_create(nodes.c_str()));
  if (!all) throw SystemError(fmt::format("couldn't parse the node list '{}'", nodes));
  std::vector<std::string> out;
  while (char* host = slurm_hostlist_shift(all.get())) {
    out.emplace_back(host);
    std::free(host);
  }
  return out;
}

bool resized_jobs_frozen() {
  init();
  slurm_conf_t* conf_raw = nullptr;
  if (slurm_load_ctl_conf(0, &conf_raw) != SLURM_SUCCESS) fail("load slurmctld's configuration");
  const std::unique_ptr<slurm_conf_t, CtlConfDeleter> conf(conf_raw);
  const std::string type = conf->accounting_storage_type ? conf->accounting_storage_type : "";
  return type.empty() || type == "accounting_storage/none";
}

void signal_steps(const JobRef& job, int sig) {
  init();
  if (slurm_kill_job(job.job_id, static_cast<std::uint16_t>(sig), KILL_STEPS_ONLY) !=
      SLURM_SUCCESS) {
    fail(fmt::format("signal the steps of job {}", job.to_string()));
  }
}

bool slurm_requeues_job_ending_in_grace() { return kRequeuesJobEndingInGrace; }

void requeue(const JobRef& job, bool hold) {
  init();
  // By job id, not by the array's id: slurm_requeue acts on exactly one job record.
  if (slurm_requeue(job.job_id, hold ? JOB_REQUEUE_HOLD : 0) != SLURM_SUCCESS) {
    fail(fmt::format("requeue job {}", job.to_string()));
  }
}

namespace {
bool g_status_comments = true;
}  // namespace

void set_status_comments(bool on) { g_status_comments = on; }
bool status_comments() { return g_status_comments; }

bool set_comment(const JobRef& job, const std::string& comment) {
  std::string text = comment;
  const int rc = update_job_rc(job, [&](job_desc_msg_t& desc) { desc.comment = text.data(); });
  if (rc == ESLURM_JOB_FINISHED || rc == ESLURM_ALREADY_DONE) return false;
  if (rc != SLURM_SUCCESS) {
    throw SystemError(fmt::format("couldn't update the comment of job {}: {}", job.to_string(),
                                  slurm_strerror(rc)));
  }
  return true;
}

void show_phase(const std::optional<JobRef>& job, JobPhase phase, const std::string& detail) {
  Status st;
  st.phase = phase;
  st.detail = detail;
  const std::string text = format_status(st);
  log(LogLevel::info, "{}", text);
  if (job) post_status(*job, text);
}

void post_status(const JobRef& job, const std::string& status) {
  if (!status_comments()) return;
  try {
    const JobInfo info = load_job(job);
    if (!set_comment(job, merge_comment(comment_prefix(info.comment), status))) {
      log(LogLevel::verbose, "the job has ended: its comment stays as it is");
    }
  } catch (const std::exception& e) {
    log(LogLevel::warning, "{}", e.what());
  }
}

std::vector<JobRow> list_jobs(std::optional<std::uint32_t> uid) {
  init();
  job_info_msg_t* raw = nullptr;
  const int rc =
      uid ? slurm_load_job_user(&raw, *uid, SHOW_ALL) : slurm_load_jobs(0, &raw, SHOW_ALL);
  if (rc != SLURM_SUCCESS) fail("load the job list");
  const std::unique_ptr<job_info_msg_t, JobInfoMsgDeleter> msg(raw);
  std::vector<JobRow> rows;
  for (std::uint32_t i = 0; i < msg->record_count; ++i) {
    const slurm_job_info_t& j = msg->job_array[i];
    JobRow r;
    r.id = j.array_task_id != NO_VAL && j.array_job_id != 0
               ? fmt::format("{}_{}", j.array_job_id, j.array_task_id)
               : std::to_string(j.job_id);
    r.name = j.name ? j.name : "";
    if (j.user_name) {
      r.user = j.user_name;
    } else if (const auto user = lookup_user(j.user_id)) {
      r.user = user->name;
    } else {
      r.user = std::to_string(j.user_id);
    }
    r.partition = j.partition ? j.partition : "";
    r.state = slurm_job_state_string(j.job_state);
    const bool pending = (j.job_state & JOB_STATE_BASE) == JOB_PENDING;
    if (pending)
      r.reason = j.state_desc ? j.state_desc
                              : reason_string(static_cast<job_state_reason>(j.state_reason));
    r.comment = j.comment ? j.comment : "";
    r.requeues = j.restart_cnt;
    r.nodes = j.nodes && !pending ? j.nodes : "";
    if (j.submit_time > 0) r.submit = std::chrono::system_clock::from_time_t(j.submit_time);
    if (j.start_time > 0) r.start = std::chrono::system_clock::from_time_t(j.start_time);
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace dl::slurm
