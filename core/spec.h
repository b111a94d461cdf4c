// The deep-learning job spec: what the --dl-* options ask for, parsed and checked
// once, in one place. The SPANK plugin builds it from options (and DL_* environment
// defaults) at submit time; it travels to the controller and to every task as DL_*
// variables, where the job_submit plugin and dlrun read it back with spec_from_env().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dl {

enum class Placement { pack, spread, leaf_switch, even };

std::string_view to_string(Placement p);

// Site defaults and limits, from the plugin's plugstack.conf arguments.
struct SiteConfig {
  // Parent of default checkpoint directories: <root>/<user>/<job> (see default_ckpt_dir).
  // It must be shared by all nodes (see shared_ckpt_root).
  std::string default_ckpt_root = "/var/tmp/slurm-dl";
  // Checkpoint directories must lie under one of these. "~" stands for the job user's
  // home directory. Empty means {default_ckpt_root, "~"}.
  std::vector<std::string> allowed_ckpt_roots;
  std::uint32_t max_gpus = 64;
  std::chrono::seconds default_grace{120};
  // Whether default_ckpt_root is shared by all nodes: yes/no asserted by the site, or
  // auto (nullopt): judged from its file-system type (see classify_fs_type).
  std::optional<bool> shared_ckpt_root;
  // Drain a node after this many steps in a row of one --dl-* job ended with the node as
  // their culprit (see core/drain.h); 0: never (the default).
  std::uint32_t drain_after = 0;
  // Where slurmstepd keeps those records: a node-local directory, root's, mode 0700.
  std::string drain_state_dir = "/var/spool/slurm-dl";
  // Mark a --dl-* job's batch host DOWN when a rank on another node lost rank 0 and the
  // batch host's slurmd does not answer this node (see core/node_down.h); off by default.
  bool down_failed_batch_host = false;
  // Where the job prolog records which job and user hold which GPUs of the node, for
  // dl-gpu-metrics (see core/gpu_owner.h): a node-local directory, root's, mode 0755;
  // empty: no records (the default, gpu_metrics=off).
  std::string gpu_metrics_dir;
  // Where Slurm's scontrol, sinfo and squeue are, for drain_after and
  // down_failed_batch_host (run as root): by default the directory configure found them
  // in (--with-slurm-bindir).
  std::string slurm_bindir = default_slurm_bindir();

  static std::string default_slurm_bindir();
  std::vector<std::string> effective_ckpt_roots() const;
};

// Parses "key=value" plugstack arguments; an unknown key or bad value throws
// InputError naming it.
SiteConfig parse_site_config(const std::vector<std::string>& args);

// The path of Slurm's `tool` (scontrol, sinfo, squeue) for the site.
std::string slurm_tool_path(const SiteConfig& site, std::string_view tool);

struct Elastic {
  std::uint32_t min = 0;
  std::uint32_t max = 0;
};

struct Spec {
  std::optional<std::uint32_t> gpus;
  Placement placement = Placement::pack;
  std::string ckpt_dir;  // absolute; empty until resolved (see default_ckpt_dir)
  std::optional<std::chrono::seconds> ckpt_every;
  std::uint32_t ckpt_keep = 3;
  bool preemptible = false;
  std::chrono::seconds grace{120};
  std::uint32_t max_restarts = 3;
  std::optional<Elastic> elastic;
  std::string experiment;
  std::string trial;
  std::chrono::seconds watchdog{0};  // 0 = off
  // --dl-resume-from: the checkpoint directory to continue from when the job's own has
  // no checkpoint of its own; as given (a job id "4711"/"100_3" or an absolute path)
  // until resolve_resume_from makes it a path.
  std::string resume_from;

  // The DL_* variables that carry this spec (only the ones that are set).
  std::vector<std::pair<std::string, std::string>> to_env() const;
};

// One --dl-* option, as registered with Slurm and listed by `sbatch --help`.
struct OptionInfo {
  const char* name;  // without "--", e.g. "dl-gpus"
  const char* arg;   // e.g. "N"; nullptr for a flag
  const char* help;  // one line
  const char* env;   // the DL_* variable that gives its default and carries it
};

const std::vector<OptionInfo>& option_infos();

// The text `sbatch --help` shows for `o`: its help, with this site's default where the
// site sets it (--dl-grace's default_grace).
std::string option_usage(const OptionInfo& o, const SiteConfig& site);

// Reads a variable of the submitting environment; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// Values the user gave on the command line or in #SBATCH lines: option name (without
// "--") -> value ("" for flags). Callbacks only store here; all checks happen in
// make_spec.
using RawOptions = std::map<std::string, std::string>;

// Whether the options or the DL_* variables of `env` (or the spec marker) ask for a DL
// job at all: make_spec returns nullopt exactly when they do not. Cheap, and needs
// nothing of the user: the submit side of every ordinary job stops here.
bool spec_requested(const RawOptions& raw, const EnvLookup& env);

// Builds and checks the spec from options, falling back to DL_* variables of `env`
// for options not given, then to site defaults. Throws InputError with one message
// naming the option (or the variable), the value and what is allowed. Returns
// nullopt when neither options nor DL_* variables ask for anything: not a DL job.
// `home` is the submitting user's home directory (for "~" in allowed roots).
std::optional<Spec> make_spec(const RawOptions& raw, const EnvLookup& env, const SiteConfig& site,
                              std::string_view home);

// Reads a spec back from the DL_* variables that to_env() wrote (the job's
// spank_job_env in the controller, the task environment in dlrun). Throws
// InputError on malformed values; nullopt when no DL_GPUS/DL_* spec is present.
std::optional<Spec> spec_from_env(const EnvLookup& env);

// The variable every DL job's tasks (and its batch script) have, and only they.
inline constexpr const char* kSpecMarker = "DL_SPEC_VERSION";

// The job a default checkpoint directory belongs to: "<array job id>_<task id>" for an
// array task, the job id for any other job. Slurm keeps it across requeues, and no
// other job (another array task, a resubmission of the same script) has it.
std::string ckpt_job_key(std::uint32_t job_id, std::optional<std::uint32_t> array_job_id,
                         std::optional<std::uint32_t> array_task_id);

// Whether `s` is a job key as ckpt_job_key makes them ("4711", "100_3").
bool is_ckpt_job_key(std::string_view s);

// <site.default_ckpt_root>/<user>/<job key>: unique per job, the same after a requeue.
// `job_key` is made a safe single path component.
std::string default_ckpt_dir(const SiteConfig& site, std::string_view user,
                             std::string_view job_key);

// --dl-resume-from as a checkpoint directory: a job key names that job's default
// directory under `user`; a path stays as it is.
std::string resolve_resume_from(const SiteConfig& site, std::string_view user,
                                std::string_view value);

// How a file system holds a checkpoint root: shared between nodes (nfs, lustre, gpfs,
// beegfs, cephfs, ...), node-local (ext4, xfs, btrfs, tmpfs, overlay, ...) or unknown.
enum class FsSharing { shared, local, unknown };
struct FsKind {
  std::string name;  // "nfs", "ext4", or "0x1234abcd" when unknown
  FsSharing sharing = FsSharing::unknown;
};
// From statfs(2)'s f_type.
FsKind classify_fs_type(std::uint64_t f_type);

// Expands "~" in the site's roots with `home` and says whether `dir` lies under one
// of them (by path components; no symlink resolution, the slurmstepd side does that).
bool ckpt_dir_allowed(const SiteConfig& site, std::string_view dir, std::string_view home);

// What the controller knows about the job; used to check the spec against the
// native request (job_submit plugin).
struct NativeRequest {
  std::optional<std::chrono::seconds> time_limit;  // nullopt: none/infinite
  std::optional<std::uint32_t> gpus;               // total GPUs from --gpus/--gres=gpu
};

// Conflicts between the spec and the rest of the job: --dl-grace not shorter than
// the time limit, --dl-gpus contradicting --gpus/--gres=gpu. Throws InputError.
void check_against_request(const Spec& spec, const NativeRequest& request);

}  // namespace dl
