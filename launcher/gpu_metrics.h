// What dl-gpu-metrics writes for node_exporter's textfile collector: the figures of each
// GPU of the node that a job holds, labelled with the job, its user, the node and the
// GPU, in Prometheus' text exposition format. Pure: the samples come from
// launcher/nvml.h, the owners from spank_dl.so's records (core/gpu_owner.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/gpu_owner.h"
#include "launcher/gpu_usage.h"

namespace dl {

// A label value as the exposition format wants it: '\' , '"' and newline escaped.
std::string prometheus_label_value(std::string_view value);

// The whole file: HELP and TYPE lines, then one series per metric and owned GPU of
// `node` (owners of other nodes are ignored). A GPU no owner names is left out; a GPU two
// records name (a record an epilog failed to remove) appears under each job.
std::string format_gpu_metrics(std::string_view node, const std::vector<GpuOwner>& owners,
                               const std::vector<GpuReading>& readings);

}  // namespace dl
