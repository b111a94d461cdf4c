// What a job's GPUs do, as dlrun sees it: on each node the first rank's dlrun samples
// the GPUs Slurm gave the step there (launcher/nvml.h) and sends the samples to rank 0
// (GPU message); rank 0 keeps the newest per node and the average over the run, and
// puts both in the status line. Pure: no NVML here.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dl {

struct GpuSample {
  unsigned minor = 0;           // /dev/nvidia<minor>: Slurm's GPU index on the node
  unsigned util = 0;            // % of the last sample period a kernel ran
  std::uint64_t mem_used = 0;   // bytes
  std::uint64_t mem_total = 0;  // bytes
};

// The GPU indices of the step on this node from Slurm's variables: SLURM_STEP_GPUS, else
// SLURM_JOB_GPUS ("0,1,3"); empty when the step has none or the text is not a list.
std::vector<unsigned> slurm_gpu_indices(const char* step_gpus, const char* job_gpus);

// A GPU message's text and back: "minor:util:used_mib:total_mib ...", at most
// kMaxGpusPerNode entries. parse throws dl::SystemError on anything else.
inline constexpr std::size_t kMaxGpusPerNode = 64;
std::string format_gpu_samples(const std::vector<GpuSample>& samples);
std::vector<GpuSample> parse_gpu_samples(std::string_view text);

// The figures of the status line ("gpu 85% (avg 80%) 12.0/80.0 GiB").
struct GpuFigures {
  unsigned util = 0;                 // now: the mean over the job's GPUs
  std::optional<unsigned> util_avg;  // the mean over the run so far
  std::uint64_t mem_used = 0;        // now, over all the job's GPUs, bytes
  std::uint64_t mem_total = 0;
};
std::string format_gpu_figures(const GpuFigures& g);
// nullopt when `text` is not what format_gpu_figures writes.
std::optional<GpuFigures> parse_gpu_figures(std::string_view text);

// Rank 0's record of the nodes' samples.
class GpuUsage {
 public:
  using Steady = std::chrono::steady_clock;
  // A node's samples replace its previous ones.
  void record(const std::string& node, std::vector<GpuSample> samples);
  // The figures now (nullopt before any sample). The average weights every sample of
  // every GPU alike: nodes sample at the same interval.
  std::optional<GpuFigures> figures() const;

 private:
  std::map<std::string, std::vector<GpuSample>> latest_;
  double util_sum_ = 0;
  std::uint64_t util_count_ = 0;
};

}  // namespace dl
