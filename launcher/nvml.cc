#include "launcher/nvml.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <type_traits>

namespace dl {
namespace {

// From nvml.h: the types and entry points dlrun calls, declared here so that the build
// does not need the header.
using Return = int;
using Device = void*;
struct Utilization {
  unsigned gpu, memory;
};
struct Memory {
  unsigned long long total, free, used;
};

}  // namespace

// Owns the handle without closing it: NVML keeps threads of its own.
struct Nvml::Library {
  Return (*init)() = nullptr;
  Return (*count)(unsigned*) = nullptr;
  Return (*by_index)(unsigned, Device*) = nullptr;
  Return (*minor)(Device, unsigned*) = nullptr;
  Return (*utilization)(Device, Utilization*) = nullptr;
  Return (*memory)(Device, Memory*) = nullptr;
  const char* (*error_string)(Return) = nullptr;
  Return (*power)(Device, unsigned*) = nullptr;  // optional: not every device reports it
};

std::optional<Nvml> Nvml::load(const std::vector<unsigned>& minors, std::string& why) {
  return open(&minors, why);
}

std::optional<Nvml> Nvml::load_all(std::string& why) { return open(nullptr, why); }

std::optional<Nvml> Nvml::open(const std::vector<unsigned>* minors, std::string& why) {
  void* so = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!so) {
    why = dlerror();
    return std::nullopt;
  }
  auto lib = std::make_shared<Library>();
  bool complete = true;
  const auto bind = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(so, name));
    if (!fn) {
      why = fmt::format("libnvidia-ml.so.1 has no {}", name);
      complete = false;
    }
  };
  bind(lib->init, "nvmlInit_v2");
  bind(lib->count, "nvmlDeviceGetCount_v2");
  bind(lib->by_index, "nvmlDeviceGetHandleByIndex_v2");
  bind(lib->minor, "nvmlDeviceGetMinorNumber");
  bind(lib->utilization, "nvmlDeviceGetUtilizationRates");
  bind(lib->memory, "nvmlDeviceGetMemoryInfo");
  bind(lib->error_string, "nvmlErrorString");
  lib->power = reinterpret_cast<decltype(lib->power)>(dlsym(so, "nvmlDeviceGetPowerUsage"));
  if (!complete) {
    dlclose(so);
    return std::nullopt;
  }
  if (const Return rc = lib->init(); rc != 0) {
    why = fmt::format("nvmlInit: {}", lib->error_string(rc));
    return std::nullopt;
  }
  unsigned count = 0;
  if (const Return rc = lib->count(&count); rc != 0) {
    why = fmt::format("nvmlDeviceGetCount: {}", lib->error_string(rc));
    return std::nullopt;
  }
  std::vector<std::pair<unsigned, Device>> devices;
  if (!minors) {
    for (unsigned i = 0; i < count; ++i) {
      Device d = nullptr;
      unsigned minor = 0;
      if (lib->by_index(i, &d) == 0 && lib->minor(d, &minor) == 0) devices.emplace_back(minor, d);
    }
    return Nvml(std::move(lib), std::move(devices));
  }
  for (unsigned want : *minors) {
    for (unsigned i = 0; i < count; ++i) {
      Device d = nullptr;
      unsigned minor = 0;
      if (lib->by_index(i, &d) == 0 && lib->minor(d, &minor) == 0 && minor == want) {
        devices.emplace_back(minor, d);
        break;
      }
    }
  }
  return Nvml(std::move(lib), std::move(devices));
}

std::vector<GpuSample> Nvml::sample() const {
  std::vector<GpuSample> out;
  for (const GpuReading& r : read()) out.push_back(r.sample);
  return out;
}

std::vector<GpuReading> Nvml::read() const {
  std::vector<GpuReading> out;
  for (const auto& [minor, d] : devices_) {
    Utilization u{};
    Memory m{};
    if (lib_->utilization(d, &u) == 0 && lib_->memory(d, &m) == 0) {
      GpuReading r{{minor, std::min(u.gpu, 100u), m.used, m.total}, std::nullopt};
      if (unsigned mw = 0; lib_->power && lib_->power(d, &mw) == 0) r.power_mw = mw;
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace dl
