// job_submit/dl: turns a DL request (the spec the SPANK plugin put into the job's
// SPANK environment) into the native shape at submit time, with the settings a
// preemptible job needs, and rejects what can never run. See dl-sched(8).
//
// It trusts nothing the SPANK plugin checked: a client built on libslurm can set the
// job's SPANK environment directly. The spec is parsed again with the SPANK plugin's
// own parser and the site's limits (the spank_dl.so arguments in PlugStackConfig), and
// the work one submission can cause is bounded (sched/submission.h). The spec it
// accepts is then written back in the one form the other plugins read
// (sched/spank_env.h), whatever spelling the client used.
#include <fmt/format.h>

#include <csignal>
#include <cstring>
#include <mutex>

#include "config.h"
#include "core/error.h"
#include "core/plugstack.h"
#include "core/spec.h"
#include "core/user_db.h"
#include "sched/gang.h"
#include "sched/plugins/controller.h"
#include "sched/plugins/guard.h"
#include "sched/preempt.h"
#include "sched/spank_env.h"
#include "sched/state_file.h"
#include "sched/submission.h"
#include "sched/tres.h"

namespace dl::sched {
namespace {

std::string_view str(const char* s) { return s ? std::string_view(s) : std::string_view(); }

void set_string(char*& field, const std::string& value) {
  xfree(field);
  if (!value.empty()) field = xstrdup(value.c_str());
}

// The partitions the job may run in: the ones it names (each once), or the default one.
std::vector<part_record_t*> partitions_of(const job_desc_msg_t* job) {
  std::vector<part_record_t*> parts;
  if (!job->partition) {
    if (default_part_loc) parts.push_back(default_part_loc);
    return parts;
  }
  for (auto& name : partition_names(job->partition)) {
    if (auto* part = find_part_record(name.data())) parts.push_back(part);
  }
  return parts;
}

// The arguments of the spank_dl.so line in PlugStackConfig or a file it includes;
// nullopt when there is none. `where` is set to the file that has it.
std::optional<std::vector<std::string>> plugstack_dl_args(std::string& where) {
  if (!slurm_conf.plugstack || !*slurm_conf.plugstack) return std::nullopt;
  auto line = find_plugstack_line(slurm_conf.plugstack, "spank_dl.so",
                                  [](const std::string& file) -> std::optional<std::string> {
                                    try {
                                      return read_file(file);
                                    } catch (const std::exception& e) {
                                      error("dl: job_submit: %s", e.what());
                                      return std::nullopt;
                                    }
                                  });
  if (!line) return std::nullopt;
  where = line->file;
  return std::move(line->args);
}

// The site's settings for the SPANK plugin, read for every DL submission as sbatch
// reads them for every command: a small file, and never stale (slurm.conf's
// last_update has a resolution of one second, too coarse to cache on).
SiteConfig site_config() {
  static std::mutex lock;
  static std::optional<std::string> logged;  // what the log last said
  std::string where;
  const auto args = plugstack_dl_args(where);
  std::string summary = "none";
  if (args) {
    summary = where + ":";
    for (const auto& a : *args) summary += " " + a;
  }
  {
    const std::lock_guard<std::mutex> hold(lock);
    if (logged != summary) {
      logged = summary;
      if (args) {
        info("dl: job_submit: the site's limits are the spank_dl.so arguments in %s",
             summary.c_str());
      } else {
        info("dl: job_submit: no spank_dl.so line in PlugStackConfig: the default limits apply");
      }
    }
  }
  if (!args) return SiteConfig{};
  try {
    return parse_site_config(*args);
  } catch (const InputError& e) {
    // The SPANK plugin refuses to load with these: no DL job can be submitted anyway.
    throw InputError(fmt::format("the site's spank_dl.so arguments in {}: {}", where, e.what()));
  }
}

std::string home_of(std::uint32_t uid) {
  const auto user = lookup_user(uid);
  if (!user) throw InputError(fmt::format("couldn't look up uid {} in the user database", uid));
  return user->home;
}

// The job's DL spec, checked as the SPANK plugin checks it. nullopt: not a DL job.
// Only the entries the other plugins read (spank_env_lookup's bound) can make a job a
// DL job, and no entry is measured beyond the longest allowed.
std::optional<Spec> checked_spec(const job_desc_msg_t* job) {
  bool any = false;
  std::size_t longest = 0;
  const std::size_t examined = std::min<std::size_t>(job->spank_job_env_size, kMaxSpankEnvEntries);
  for (std::uint32_t i = 0; job->spank_job_env && i < examined; ++i) {
    const char* kv = job->spank_job_env[i];
    if (!kv) continue;
    any = any || std::strncmp(kv, "DL_", 3) == 0;
    longest = std::max(longest, ::strnlen(kv, kMaxSpankEnvEntry + 1));
  }
  if (!any) return std::nullopt;
  check_spank_env_size(job->spank_job_env_size, longest);
  return make_spec({}, env_of(job->spank_job_env, job->spank_job_env_size), site_config(),
                   home_of(job->user_id));
}

// The shape in the first of the job's partitions where it can run; the error for
// the first partition when it can run in none.
Shape fit(const Gang& gang, const std::vector<part_record_t*>& parts) {
  std::optional<ShapeError> first;
  for (auto* part : parts) {
    try {
      return fit_gang(gang, capacity_of(part), part->name);
    } catch (const ShapeError& e) {
      if (!first) first = e;
    }
  }
  throw *first;
}

void apply_shape(job_desc_msg_t* job, const Shape& shape) {
  job->min_nodes = shape.nodes_min;
  job->max_nodes = shape.nodes_max;
  // The shape replaces every GPU request the job had; other GRES stay.
  set_string(job->tres_per_job, without_gpus(str(job->tres_per_job)));
  set_string(job->tres_per_socket, without_gpus(str(job->tres_per_socket)));
  set_string(job->tres_per_task, without_gpus(str(job->tres_per_task)));
  std::string per_node = fmt::format("{}:{}", kGpuTres, shape.gpus_per_node);
  if (const auto rest = without_gpus(str(job->tres_per_node)); !rest.empty()) {
    per_node += "," + rest;
  }
  set_string(job->tres_per_node, per_node);
  if (shape.exclusive) job->shared = JOB_SHARED_NONE;
  if (shape.one_switch) {
    job->req_switch = 1;
    // Slurm caps the wait at SchedulerParameters=max_switch_wait (300 s by default),
    // then starts the job on any nodes.
    job->wait4switch = 86400;
  }
}

// The job's task count, and the copy sbatch put into the batch script's environment
// (SLURM_NTASKS, SLURM_NPROCS) when it derived one at submission: the script's srun
// reads that, not the job record.
void set_task_count(job_desc_msg_t* job, std::uint32_t n) {
  job->num_tasks = n;
  for (std::uint32_t i = 0; job->environment && i < job->env_size; ++i) {
    for (const char* name : {"SLURM_NTASKS=", "SLURM_NPROCS="}) {
      if (job->environment[i] && std::strncmp(job->environment[i], name, std::strlen(name)) == 0) {
        xfree(job->environment[i]);
        job->environment[i] = xstrdup(fmt::format("{}{}", name, n).c_str());
      }
    }
  }
}

// The job's SPANK environment with its spec as Spec::to_env() writes it: what every
// reader in slurmctld (spec_of) and the job's prolog and epilog see, however the
// client spelled it ("yes" for 1, "30m" for 1800).
void normalize_spank_env(job_desc_msg_t* job, const Spec& spec) {
  const std::vector<std::string> env =
      normalized_spank_env(job->spank_job_env, job->spank_job_env_size, spec);
  for (std::uint32_t i = 0; job->spank_job_env && i < job->spank_job_env_size; ++i) {
    xfree(job->spank_job_env[i]);
  }
  xfree(job->spank_job_env);
  job->spank_job_env = static_cast<char**>(xcalloc(env.size() + 1, sizeof(char*)));
  for (std::size_t i = 0; i < env.size(); ++i) job->spank_job_env[i] = xstrdup(env[i].c_str());
  job->spank_job_env_size = static_cast<std::uint32_t>(env.size());
}

// One task per GPU unless the user laid the tasks out (-n, --ntasks-per-node); then
// their layout stands and the comment shows it. Returns that explicit layout, or "".
std::string apply_tasks(job_desc_msg_t* job, const Gang& gang, const Shape& shape,
                        std::uint32_t submitted_nodes) {
  std::optional<std::uint32_t> total =
      job->num_tasks != NO_VAL && job->num_tasks > 0 ? std::optional(job->num_tasks) : std::nullopt;
  const std::optional<std::uint32_t> per_node =
      job->ntasks_per_node != NO_VAL16 && job->ntasks_per_node > 0
          ? std::optional<std::uint32_t>(job->ntasks_per_node)
          : std::nullopt;
  if (per_node && total) {
    if (const auto n = tasks_for_per_node(*per_node, *total, submitted_nodes, shape)) {
      set_task_count(job, *n);
      total.reset();
    }
  }
  if (total || per_node) return explicit_tasks(total, per_node);
  const Tasks tasks = one_task_per_gpu(gang, shape);
  if (tasks.per_node) job->ntasks_per_node = static_cast<std::uint16_t>(*tasks.per_node);
  if (tasks.total) set_task_count(job, *tasks.total);
  return "";
}

// --dl-preemptible: Slurm may requeue the job; its steps hear about the end
// warn_time before it (SIGUSR2, not to the batch shell) so the launcher checkpoints;
// and backfill may start it in any hole of at least time_min (the user's --time-min if
// given, else 4 x warn_time).
void apply_preemptible(job_desc_msg_t* job, const Spec& spec,
                       std::optional<std::chrono::seconds> limit) {
  job->requeue = 1;
  job->warn_signal = SIGUSR2;
  job->warn_flags = 0;
  job->warn_time = static_cast<std::uint16_t>(warn_time(spec.grace).count());
  if (job->time_min != NO_VAL) return;  // the user's own (dl-search: one rung)
  if (const auto tm = backfill_time_min(spec.grace, limit)) {
    job->time_min = static_cast<std::uint32_t>(tm->count() / 60);
  }
}

int submit(job_desc_msg_t* job, char** err_msg) {
  const auto reject = [&](int code, const std::string& message) {
    // The same prefix as the SPANK plugin's messages: the user sees one voice.
    *err_msg = xstrdup(("dl: " + message).c_str());
    info("dl: job_submit: rejected a job of uid %u: %s", job->user_id, message.c_str());
    return code;
  };
  try {
    const auto spec = checked_spec(job);
    if (!spec) return SLURM_SUCCESS;
    const auto parts = partitions_of(job);
    // Without a partition Slurm rejects the job with its own message.
    if (parts.empty()) return SLURM_SUCCESS;
    const auto limit = time_limit(job->time_limit, parts.front());
    const std::uint32_t nodes = job->min_nodes != NO_VAL && job->min_nodes > 0 ? job->min_nodes : 0;
    const std::uint32_t tasks = job->num_tasks != NO_VAL ? job->num_tasks : 0;
    check_against_request(
        *spec, {limit, requested_gpus({str(job->tres_per_job), str(job->tres_per_node),
                                       str(job->tres_per_socket), str(job->tres_per_task), nodes,
                                       tasks})});
    if (job->comment && *job->comment) {
      throw InputError(
          "--comment: the comment of a slurm-dl job holds its shape and status; label it with "
          "--dl-experiment and --dl-trial instead");
    }
    std::string summary = "dl: no GPUs";
    if (auto gang = Gang::of(*spec)) {
      if (nodes) gang->nodes = nodes;
      const Shape shape = fit(*gang, parts);
      apply_shape(job, shape);
      summary = describe(*gang, shape, spec->preemptible, apply_tasks(job, *gang, shape, nodes));
    } else if (spec->preemptible) {
      summary += ", preemptible";
    }
    if (spec->preemptible) apply_preemptible(job, *spec, limit);
    normalize_spank_env(job, *spec);
    set_string(job->comment, summary);
    verbose("dl: job_submit: %s", summary.c_str());
    return SLURM_SUCCESS;
  } catch (const ShapeError& e) {
    return reject(ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE, e.what());
  } catch (const InputError& e) {
    return reject(SLURM_ERROR, e.what());
  }
}

// An update of a DL job's time limit: the grace must stay shorter, and a preemptible
// job's time_min follows the rule. The reason of a refusal goes to the controller log,
// and to the user where Slurm's hook has a message (err_msg not null).
int modify(job_desc_msg_t* update, job_record_t* job, char** err_msg) {
  if (update->time_limit == NO_VAL) return SLURM_SUCCESS;
  const auto spec = spec_of(job);
  if (!spec) return SLURM_SUCCESS;
  const auto limit = time_limit(update->time_limit, job->part_ptr);
  try {
    check_against_request(*spec, {limit, std::nullopt});
  } catch (const InputError& e) {
    info("dl: job_modify: JobId=%u: %s", job->job_id, e.what());
    if (err_msg) *err_msg = xstrdup((std::string("dl: ") + e.what()).c_str());
    return ESLURM_INVALID_TIME_LIMIT;
  }
  if (spec->preemptible && update->time_min == NO_VAL) {
    const auto tm = backfill_time_min(spec->grace, limit);
    update->time_min = tm ? static_cast<std::uint32_t>(tm->count() / 60) : 0;
  }
  return SLURM_SUCCESS;
}

}  // namespace
}  // namespace dl::sched

extern "C" {
// Globals the plugin loader reads; `extern` keeps them visible from C++.
extern const char plugin_name[] = "slurm-dl job_submit: DL gang shapes and preemptible jobs";
extern const char plugin_type[] = "job_submit/dl";
extern const uint32_t plugin_version = SLURM_VERSION_NUMBER;

int init(void) {
  return dl::sched::guarded("init", SLURM_ERROR, [] {
    verbose("dl: %s %s loaded", plugin_type, PACKAGE_VERSION);
    return SLURM_SUCCESS;
  });
}

int fini(void) { return SLURM_SUCCESS; }

int job_submit(job_desc_msg_t* job_desc, uint32_t, char** err_msg) {
  return dl::sched::guarded("job_submit", SLURM_ERROR,
                            [&] { return dl::sched::submit(job_desc, err_msg); });
}
}

namespace {
int modify_guarded(job_desc_msg_t* job_desc, job_record_t* job_ptr, char** err_msg) {
  return dl::sched::guarded("job_modify", SLURM_ERROR,
                            [&] { return dl::sched::modify(job_desc, job_ptr, err_msg); });
}
}  // namespace

DL_DEFINE_JOB_MODIFY(modify_guarded)
