#include "launcher/gpu_metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <optional>

namespace dl {

std::string prometheus_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string format_gpu_metrics(std::string_view node, const std::vector<GpuOwner>& owners,
                               const std::vector<GpuReading>& readings) {
  struct Metric {
    const char* name;
    const char* help;
    std::function<std::optional<double>(const GpuReading&)> value;
  };
  const Metric metrics[] = {
      {"slurm_dl_gpu_utilization", "Percent of the last sample period a kernel ran on the GPU.",
       [](const GpuReading& r) { return std::optional<double>(r.sample.util); }},
      {"slurm_dl_gpu_memory_used_bytes", "GPU memory in use, in bytes.",
       [](const GpuReading& r) { return std::optional<double>(r.sample.mem_used); }},
      {"slurm_dl_gpu_memory_total_bytes", "GPU memory in all, in bytes.",
       [](const GpuReading& r) { return std::optional<double>(r.sample.mem_total); }},
      {"slurm_dl_gpu_power_watts", "Power the GPU draws, in watts.",
       [](const GpuReading& r) {
         return r.power_mw ? std::optional<double>(*r.power_mw / 1000.0) : std::nullopt;
       }},
  };
  std::string out;
  for (const Metric& m : metrics) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", m.name, m.help, m.name);
    for (const GpuReading& r : readings) {
      const GpuSample& s = r.sample;
      const auto v = m.value(r);
      if (!v) continue;
      for (const GpuOwner& o : owners) {
        if (o.node != node || std::find(o.gpus.begin(), o.gpus.end(), s.minor) == o.gpus.end()) {
          continue;
        }
        out += fmt::format(
            "{}{{jobid=\"{}\",user=\"{}\",account=\"{}\",node=\"{}\",gpu=\"{}\"}} {}\n", m.name,
            o.job, prometheus_label_value(o.user), prometheus_label_value(o.account),
            prometheus_label_value(node), s.minor, *v);
      }
    }
  }
  return out;
}

}  // namespace dl
