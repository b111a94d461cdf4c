// Submit side: sbatch and salloc (allocator context) and srun (local context). The
// spec is checked here, before anything reaches the controller, and handed to it
// in the job's SPANK environment for the job_submit plugin.
#include <unistd.h>

#include <cstdlib>

#include "core/error.h"
#include "core/private_dir.h"
#include "core/spec.h"
#include "spank/contexts.h"
#include "spank/state.h"

namespace dl::spank {

int submit_post_opt(spank_t sp) {
  const EnvLookup env = [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
  // An ordinary job: nothing to check or pass on, and no user database lookup (a user
  // it does not know submits as without slurm-dl; issue 15: the plugin's cost to
  // submissions that do not use it).
  if (!spec_requested(raw_options(), env)) return 0;
  std::optional<Spec> spec;
  try {
    spec = make_spec(raw_options(), env, site_config(), home_of(getuid()));
  } catch (const InputError& e) {
    // The user's mistake: one line, and nothing is submitted. Returning an error
    // would add Slurm's own generic lines after ours; nothing has been allocated or
    // sent yet at this point, so sbatch/salloc/srun can simply stop.
    slurm_error("dl: %s", e.what());
    std::exit(EXIT_FAILURE);
  }
  if (!spec) return 0;
  try {
    // What of the checkpoint paths is visible here is checked now, so that a job that
    // would be refused on its nodes is not submitted (see private_dir.h).
    const SiteConfig& site = site_config();
    const std::string home = home_of(getuid());
    std::vector<std::string> roots;
    for (const auto& r : site.effective_ckpt_roots()) roots.push_back(r == "~" ? home : r);
    const std::string user = user_name_of(getuid());
    const std::string dir =
        spec->ckpt_dir.empty() ? default_ckpt_dir(site, user, "0") : spec->ckpt_dir;
    // For the default directory only <root>/<user>: the job id is not known yet.
    check_private_path(spec->ckpt_dir.empty() ? dir.substr(0, dir.rfind('/')) : dir, roots,
                       getuid());
    if (!spec->resume_from.empty()) {
      spec->resume_from = resolve_resume_from(site, user, spec->resume_from);
      check_private_path(spec->resume_from, roots, getuid());
    }
  } catch (const InputError& e) {
    slurm_error("dl: %s", e.what());
    std::exit(EXIT_FAILURE);
  }
  for (const auto& [name, value] : spec->to_env()) {
    const spank_err_t rc = spank_job_control_setenv(sp, name.c_str(), value.c_str(), 1);
    // srun inside an existing allocation cannot change the job; its steps still get
    // the options, which slurmstepd turns into the same spec.
    if (rc == ESPANK_NOT_AVAIL || rc == ESPANK_BAD_ARG) return 0;
    if (rc != ESPANK_SUCCESS) {
      throw SystemError("couldn't pass " + name + " to the controller: " + spank_strerror(rc));
    }
  }
  return 0;
}

}  // namespace dl::spank
