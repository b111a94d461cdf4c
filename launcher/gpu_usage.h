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

// A sample with the power draw, for dl-gpu-metrics (dlrun's messages do not carry it).
struct GpuReading {
  GpuSample sample;
  std::optional<unsigned> power_mw;  // when the device reports it
};

// The GPU indices of the step on this node from Slurm's variables: SLURM_STEP_GPUS, else
// SLURM_JOB_GPUS ("0,1,3"); empty when the step has none or the text is not a list.
std::vector<unsigned> slurm_gpu_indices(const char* step_gpus, const char* job_gpus);

// A GPU message's text and back: "minor:util:used_mib:total_mib ...", at most
// kMaxGpusPerNode entries. parse throws dl::SystemError on anything else.
inline constexpr std::size_t kMaxGpusPerNode = 64;
std::string format_gpu_samples(const std::vector<GpuSample>& samples);
std::vector<GpuSample> parse_gpu_samples(std::string_view text);

// The figures of the status line ("gpu 85% (avg 80%) 12.0/80.0 GiB", and " idle 35m"
// when the idle rule flags the job).
struct GpuFigures {
  unsigned util = 0;                 // now: the mean over the job's GPUs
  std::optional<unsigned> util_avg;  // the mean over the run so far
  std::uint64_t mem_used = 0;        // now, over all the job's GPUs, bytes
  std::uint64_t mem_total = 0;
  std::optional<std::chrono::seconds> idle;  // how long every GPU has been idle (flagged)
};

// The idle rule (--gpu-idle=UTIL%:DURATION): a job is flagged idle once every one of its
// GPUs has been below UTIL% in every sample for DURATION. "off": never.
struct IdleRule {
  unsigned below = 5;
  std::chrono::seconds after{30 * 60};
};
// Throws dl::InputError naming `option` ("--gpu-idle=90:5m: expected off or UTIL%:DURATION
// with UTIL from 1 to 100 and DURATION from 10s to 7d, e.g. 5%:30m"). nullopt for "off".
std::optional<IdleRule> parse_idle_rule(std::string_view option, std::string_view text);
std::string format_gpu_figures(const GpuFigures& g);
// nullopt when `text` is not what format_gpu_figures writes.
std::optional<GpuFigures> parse_gpu_figures(std::string_view text);

// Rank 0's record of the nodes' samples.
class GpuUsage {
 public:
  using Steady = std::chrono::steady_clock;
  explicit GpuUsage(std::optional<IdleRule> idle = std::nullopt) : rule_(idle) {}
  // A node's samples replace its previous ones.
  void record(const std::string& node, std::vector<GpuSample> samples, Steady::time_point now);
  // The figures at `now` (nullopt before any sample). The average weights every sample of
  // every GPU alike: nodes sample at the same interval.
  std::optional<GpuFigures> figures(Steady::time_point now) const;

 private:
  std::optional<IdleRule> rule_;
  std::map<std::string, std::vector<GpuSample>> latest_;
  double util_sum_ = 0;
  std::uint64_t util_count_ = 0;
  // Since when every sample of every GPU has been below the rule's threshold.
  std::optional<Steady::time_point> idle_since_;
};

}  // namespace dl
