// The channel files dlrun shares with a training program (launcher/channel_file.cc):
// one 4 KiB page per rank, named after the job step, in /dev/shm (or TMPDIR, or /tmp,
// when /dev/shm is not writable). dlrun removes its own at exit; a dlrun killed with
// SIGKILL cannot, so slurmstepd's SPANK plugin removes the step's leftovers, as root,
// when the step ends (spank/slurmstepd.cc). The name is defined here, once, for both.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace dl {

// "dlrun-<job>.<step>-": the start of every channel file name of a job step. `job` is
// the job id, or "<array job id>_<task id>" for an array task (as dlrun names the job).
std::string channel_file_prefix(std::string_view job, std::string_view step);

// "dlrun-<job>.<step>-<rank>-": dlrun adds 16 random hex digits (sys::create_unique_at),
// which keep restarted ranks apart and cannot be planted in advance by another user (a
// name of the job, step, rank and pid alone can be, for every pid).
std::string channel_file_stem(std::string_view job, std::string_view step, long rank);

// Whether root may remove the entry `name` (lstat'ed as `file`) of the directory `dir`
// for the job's user `uid`: a regular file (never a link, FIFO or device) owned by `uid`
// whose name is `prefix` followed by "<rank>-<suffix>" (a decimal rank, then 1 to 16
// lower-case hex digits: dlrun's random suffix, or the pid of a dlrun of an earlier
// release), in a directory where the
// user could remove it as well (the user's own, or sticky and writable by everyone, as
// /dev/shm and /tmp). Root thereby never removes what the user could not.
bool removable_channel_file(const struct stat& dir, std::string_view name, const struct stat& file,
                            std::string_view prefix, uid_t uid);

// Removes the removable channel files (above) of `prefix` in the directory `dir` and
// returns how many it removed. The directory is opened with O_NOFOLLOW (a link there is
// refused) and every entry is examined with fstatat(AT_SYMLINK_NOFOLLOW) and removed
// with unlinkat relative to it: nothing is opened, so no link is followed and no FIFO
// blocks. A missing directory removes nothing. Throws SystemError.
std::size_t remove_channel_files(const std::string& dir, std::string_view prefix, uid_t uid);

}  // namespace dl
