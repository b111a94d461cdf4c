// SlurmJobs through libslurm (slurm_load_job_user, slurm_update_job2, slurm_requeue,
// slurm_kill_job), and sbatch for submissions: they carry spank_dl.so's --dl-* options.
// Written against Slurm 22.05 and 24.11.
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <ctime>
#include <limits>
#include <memory>
#include <mutex>

#include "core/error.h"
#include "core/process.h"
#include "exp/slurm_jobs.h"

// Exported by libslurm (the names squeue prints for a job's state) but not declared in
// <slurm/slurm.h>.
extern "C" char* slurm_job_state_string(uint32_t state);

namespace dl::exp::search {
namespace {

// What slurmctld's job_mgr.c writes as the description of a job it requeued held.
constexpr const char* kRequeuedHeld = "job requeued in held state";

struct JobInfoMsgDeleter {
  void operator()(job_info_msg_t* m) const noexcept { slurm_free_job_info_msg(m); }
};
using JobInfoMsg = std::unique_ptr<job_info_msg_t, JobInfoMsgDeleter>;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string outcome(int rc) { return rc == SLURM_SUCCESS ? "" : slurm_strerror(errno); }

class LibslurmJobs : public SlurmJobs {
 public:
  LibslurmJobs() {
    static std::once_flag once;
    std::call_once(once, [] { slurm_init(nullptr); });
  }

  Submitted submit(const std::vector<std::string>& options,
                   const std::vector<std::string>& env) override {
    CommandSpec spec;
    spec.argv = {"sbatch", "--parsable"};
    spec.argv.insert(spec.argv.end(), options.begin(), options.end());
    spec.env = env;
    const CommandResult r = run_command(spec);
    const bool ok = WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0;
    const std::string id = trim(r.out.substr(0, r.out.find(';')));
    if (!ok || id.empty()) return {"", trim(r.err)};
    return {id, ""};
  }

  std::vector<QueuedJob> queue() override {
    job_info_msg_t* raw = nullptr;
    if (slurm_load_job_user(&raw, static_cast<std::uint32_t>(::getuid()), SHOW_ALL) !=
        SLURM_SUCCESS) {
      throw SystemError(std::string("couldn't load the job list: ") + slurm_strerror(errno));
    }
    const JobInfoMsg msg(raw);
    std::vector<QueuedJob> out;
    for (std::uint32_t i = 0; i < msg->record_count; ++i) {
      const slurm_job_info_t& j = msg->job_array[i];
      QueuedJob q;
      q.id = std::to_string(j.job_id);
      q.name = j.name ? j.name : "";
      q.state = slurm_job_state_string(j.job_state);
      q.requeue_held = (j.job_state & JOB_STATE_BASE) == JOB_PENDING && j.state_desc &&
                       std::string(j.state_desc) == kRequeuedHeld;
      out.push_back(std::move(q));
    }
    return out;
  }

  std::string cancel(const std::string& job) override {
    return outcome(slurm_kill_job(id_of(job), SIGKILL, 0));
  }

  // As scontrol hold and release: the priority of a pending job, 0 or back to Slurm's.
  std::string hold(const std::string& job) override {
    return update(job, [](job_desc_msg_t& desc) {
      desc.priority = 0;
      desc.alloc_sid = 0;
    });
  }
  std::string release(const std::string& job) override {
    return update(job, [](job_desc_msg_t& desc) { desc.priority = INFINITE; });
  }

  std::string requeue_hold(const std::string& job) override {
    return outcome(slurm_requeue(id_of(job), JOB_REQUEUE_HOLD));
  }

  double time_left(const std::string& job) override {
    job_info_msg_t* raw = nullptr;
    if (slurm_load_job(&raw, id_of(job), SHOW_DETAIL) != SLURM_SUCCESS) return -1;
    const JobInfoMsg msg(raw);
    if (msg->record_count == 0) return -1;
    const slurm_job_info_t& j = msg->job_array[0];
    if ((j.job_state & JOB_STATE_BASE) != JOB_RUNNING || j.time_limit == NO_VAL) return -1;
    if (j.time_limit == INFINITE) return std::numeric_limits<double>::infinity();
    // As squeue's %L: the limit less the time run, suspended time left out.
    const double used = static_cast<double>(j.pre_sus_time) +
                        std::difftime(std::time(nullptr), std::max(j.start_time, j.suspend_time));
    return std::max(0.0, j.time_limit * 60.0 - used);
  }

 private:
  static std::uint32_t id_of(const std::string& job) {
    return static_cast<std::uint32_t>(std::stoul(job));
  }

  // slurm_update_job2 on `job` with the fields `set` fills in; "" or Slurm's reason.
  template <typename Set>
  static std::string update(const std::string& job, Set&& set) {
    job_desc_msg_t desc;
    slurm_init_job_desc_msg(&desc);
    std::string id = job;
    desc.job_id_str = id.data();
    set(desc);
    job_array_resp_msg_t* resp = nullptr;
    const int rc = slurm_update_job2(&desc, &resp);
    int task_rc = rc == SLURM_SUCCESS ? SLURM_SUCCESS : errno;
    if (resp) {
      for (std::uint32_t i = 0; i < resp->job_array_count; ++i) {
        if (resp->error_code[i] != SLURM_SUCCESS) task_rc = static_cast<int>(resp->error_code[i]);
      }
      slurm_free_job_array_resp(resp);
    }
    return task_rc == SLURM_SUCCESS ? "" : slurm_strerror(task_rc);
  }
};

}  // namespace

std::unique_ptr<SlurmJobs> libslurm_jobs() { return std::make_unique<LibslurmJobs>(); }

}  // namespace dl::exp::search
