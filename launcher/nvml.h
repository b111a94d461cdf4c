// NVML, loaded at run time as NCCL is (dlopen("libnvidia-ml.so.1")), so that dlrun
// builds and runs where there is no GPU driver: there, load() says why and nothing is
// sampled.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/gpu_usage.h"

namespace dl {

class Nvml {
 public:
  // The devices whose minor numbers are in `minors`, found once. NVML numbers devices its
  // own way, and in a task whose devices Slurm constrains CUDA renumbers them too; the
  // minor number (/dev/nvidia<N>) is what Slurm's GPU index names. A device NVML cannot
  // open (another job's, behind the device cgroup) is left out. nullopt, with the reason
  // in `why`, when the library is missing or nvmlInit fails.
  static std::optional<Nvml> load(const std::vector<unsigned>& minors, std::string& why);
  // Every device of the node that NVML can open (dl-gpu-metrics, as root).
  static std::optional<Nvml> load_all(std::string& why);

  // One sample of each of those devices; one that cannot be queried now is left out.
  std::vector<GpuSample> sample() const;
  // The same with the power draw, when the device reports it (dl-gpu-metrics).
  std::vector<GpuReading> read() const;

 private:
  struct Library;
  static std::optional<Nvml> open(const std::vector<unsigned>* minors, std::string& why);
  Nvml(std::shared_ptr<const Library> lib, std::vector<std::pair<unsigned, void*>> devices)
      : lib_(std::move(lib)), devices_(std::move(devices)) {}
  std::shared_ptr<const Library> lib_;
  std::vector<std::pair<unsigned, void*>> devices_;  // minor number, NVML handle
};

}  // namespace dl
