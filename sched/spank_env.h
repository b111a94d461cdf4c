// A job's SPANK environment ("NAME=value" strings, as job_desc_msg_t and job_record_t
// carry it) as the controller plugins read it: one parser for all of them, and a bound
// on the work, since slurmctld's locks are held while they read and any client on
// libslurm can set the environment as it likes (a job without --dl-* options is never
// checked at submission). job_submit/dl rewrites a DL job's spec in the one form
// Spec::to_env() writes (normalized_spank_env); the others read it back with
// spank_env_spec, exactly as job_submit/dl parsed it. Pure: the plugins supply the
// strings.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/spec.h"

namespace dl {

// A lookup of one variable that examines at most kMaxSpankEnvEntries entries
// (sched/submission.h) and at most the variable's name and '=' of each, and takes a
// value of at most kMaxSpankEnvEntry bytes: an environment larger than that cannot be
// a DL job's (job_submit/dl refuses it), so what lies beyond is not read. The array
// must outlive the lookup.
EnvLookup spank_env_lookup(const char* const* env, std::size_t size);

// Whether the environment carries a DL spec (its marker), without allocating: what the
// controller's sweep asks of every job before it reads a spec.
bool spank_env_has_spec(const char* const* env, std::size_t size);

// The job's DL spec, parsed by the same code (spec_from_env over spank_env_lookup) in
// every plugin; nullopt for a job without one. Throws InputError on a malformed spec
// (which job_submit/dl never lets through).
std::optional<Spec> spank_env_spec(const char* const* env, std::size_t size);

// The SPANK environment job_submit/dl stores for a job whose spec it accepted: the
// spec first, as `spec.to_env()` writes it (so that readers find it in the first
// entries), then every entry that does not carry a spec variable (the marker or one of
// option_infos()' variables), in order.
std::vector<std::string> normalized_spank_env(const char* const* env, std::size_t size,
                                              const Spec& spec);

}  // namespace dl
