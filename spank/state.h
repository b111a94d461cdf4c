// What the plugin holds between hooks of one process (sbatch, srun or one
// slurmstepd): the site configuration from plugstack.conf and the raw option values.
#pragma once

#include <sys/stat.h>

#include <string>

#include "core/spec.h"
#include "core/sysio.h"
#include "spank/spank_api.h"

namespace dl::spank {

// Parses the plugstack.conf arguments; an unknown key or bad value throws InputError.
void load_site_config(int argc, char** argv);
const SiteConfig& site_config();

// Creates the default checkpoint root, owned by root with mode 1777, when it is missing
// (core/private_dir.h); logs one error line when it cannot, or when the root belongs to
// another user.
void make_default_ckpt_root();

// Logs one line when the default checkpoint root is not shared between nodes (by its
// file-system type, unless the site asserted shared_ckpt_root=yes/no): a job requeued
// onto other nodes would not find its checkpoints there.
void check_ckpt_root_sharing();

// Registers every --dl-* option with Slurm. The callbacks only store the values
// (Slurm may call them twice); everything is checked later in make_spec.
void register_options(spank_t sp);
const RawOptions& raw_options();

// The home directory of `uid`, for "~" in allowed_ckpt_roots.
std::string home_of(uid_t uid);
std::string user_name_of(uid_t uid);

// A directory of the plugin's own records: `path`, made with `mode` when missing (its
// parent must exist), opened without following a link; its owner and mode in `st`, for
// the caller to check.
sys::Fd open_plugin_dir(const std::string& path, mode_t mode, struct stat& st);

// drain_state_dir, where the drain_after records are: root's (the user of slurmstepd
// and of the job epilog), mode 0700, opened without following a link; created when
// missing (its parent must exist). Throws SystemError otherwise.
sys::Fd open_drain_state_dir();

}  // namespace dl::spank
