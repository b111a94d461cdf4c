// NVML, loaded at run time as NCCL is (dlopen("libnvidia-ml.so.1")), so that dlrun
// builds and runs where there is no GPU driver: there, load() says why and nothing is
// sampled.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/gpu_usage.h"

namespace dl {

class Nvml {
 public:
  // nullopt, with the reason in `why`, when the library is missing or nvmlInit fails.
  static std::optional<Nvml> load(std::string& why);

  // The devices whose minor numbers are in `minors`, in that order. NVML numbers devices
  // its own way, and in a task whose devices Slurm constrains CUDA renumbers them too; the
  // minor number (/dev/nvidia<N>) is what Slurm's GPU index names. A device NVML cannot
  // query (another job's, behind the device cgroup) is left out.
  std::vector<GpuSample> sample(const std::vector<unsigned>& minors) const;

 private:
  struct Library;
  explicit Nvml(std::shared_ptr<const Library> lib) : lib_(std::move(lib)) {}
  std::shared_ptr<const Library> lib_;
};

}  // namespace dl
