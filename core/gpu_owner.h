// Which job and user hold which GPUs of a node, for dl-gpu-metrics: spank_dl.so writes
// one record per job and node in its job prolog (as root, into the site's gpu_metrics
// directory) and removes it in the epilog; the exporter reads the records back and
// labels each GPU's figures with them. Pure: the record's text and the checks on it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dl {

struct GpuOwner {
  std::string node;            // Slurm's NodeName
  std::uint32_t job = 0;       // SLURM_JOB_ID
  uid_t uid = 0;               // the job's user
  std::string user;            // their name
  std::vector<unsigned> gpus;  // Slurm's GPU indices on the node (/dev/nvidia<N>)
  std::string account;         // the job's Slurm account; "" without accounting
};

inline constexpr std::size_t kMaxGpuOwnerBytes = 4096;

// The GPU indices of SLURM_JOB_GPUS ("0,1,3"), each below 1024 and given once;
// InputError on anything else (an empty text is a job without GPUs).
std::vector<unsigned> parse_gpu_index_list(std::string_view text);

// "<node>.<job>": the record's file name; one job's records on two nodes never collide.
std::string gpu_owner_file_name(const GpuOwner& owner);

// One line: "node=n1 job=12 uid=1000 user=alice gpus=0,1 account=vision\n".
std::string format_gpu_owner(const GpuOwner& owner);

// The record back; InputError unless it is exactly one such line with a node and user
// name of letters, digits, '.', '_' and '-' (at most 64 bytes), a job id above 0 and an
// account of the same letters (or empty); a record without the account (written by an
// earlier version, before an upgrade) has none.
GpuOwner parse_gpu_owner(std::string_view text);

}  // namespace dl
