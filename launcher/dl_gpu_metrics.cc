// dl-gpu-metrics: every interval, the figures of each GPU of this node that a job holds
// (NVML, launcher/nvml.h), labelled with the job and user that spank_dl.so's job prolog
// recorded (core/gpu_owner.h), written for node_exporter's textfile collector
// (launcher/gpu_metrics.h). Runs as root, as a service; see dl-gpu-metrics(8).
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "core/cli.h"
#include "core/error.h"
#include "core/gpu_owner.h"
#include "core/parse.h"
#include "core/sysio.h"
#include "launcher/gpu_metrics.h"
#include "launcher/nvml.h"

namespace {

using dl::GpuOwner;

// The records of `node` in `dir`. The directory must belong to root and be writable by no
// one else, so that only spank_dl.so's prolog can have written them; a record that does
// not parse is reported and left out.
std::vector<GpuOwner> read_owners(const std::string& dir, const std::string& node) {
  // Made by the first prolog after boot (/run is a tmpfs).
  if (dl::sys::file_type(dir) == dl::sys::FileType::missing) return {};
  dl::sys::Fd fd = dl::sys::open_file(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) {
    throw dl::SystemError(fmt::format("fstat {}: {}", dir, std::strerror(errno)));
  }
  if (st.st_uid != 0 || (st.st_mode & 022) != 0) {
    throw dl::SystemError(fmt::format(
        "{} must belong to root and be writable by no one else (it has uid {}, mode {:o})", dir,
        st.st_uid, st.st_mode & 07777));
  }
  std::vector<GpuOwner> owners;
  const std::string prefix = node + ".";
  for (const std::string& name : dl::sys::list_dir_fd(fd)) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    try {
      GpuOwner o = dl::parse_gpu_owner(dl::sys::read_file_at(fd, name, dl::kMaxGpuOwnerBytes));
      if (o.node != node || dl::gpu_owner_file_name(o) != name) {
        throw dl::InputError("its name does not match its node and job");
      }
      owners.push_back(std::move(o));
    } catch (const std::exception& e) {
      // Removed by its job's epilog meanwhile: not worth a line.
      if (dl::sys::file_type_at(fd, name) == dl::sys::FileType::missing) continue;
      std::cerr << "dl-gpu-metrics: skipping " << dir << "/" << name << ": " << e.what() << "\n";
    }
  }
  return owners;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Writes the utilization, memory and power of each GPU of this node that a Slurm job "
      "holds, labelled with the job and its user, for node_exporter's textfile collector."};
  std::string owners_dir = "/run/slurm-dl-gpus";
  std::string output = "/var/lib/prometheus/node-exporter/slurm_dl_gpu.prom";
  std::string interval_text = "10s";
  std::string node = dl::sys::hostname().substr(0, dl::sys::hostname().find('.'));
  bool once = false;
  app.add_option("--owners", owners_dir,
                 "the directory of spank_dl.so's GPU records (its gpu_metrics= argument)")
      ->capture_default_str();
  app.add_option("--output", output, "the file to write (the name must end in .prom)")
      ->capture_default_str();
  app.add_option("--interval", interval_text, "time between samples, 1s to 1h")
      ->capture_default_str();
  app.add_option("--node", node, "this node's Slurm NodeName")->capture_default_str();
  app.add_flag("--once", once, "write the file once and exit (for a timer)");
  dl::add_standard_flags(app, "dl-gpu-metrics");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    const auto interval = dl::parse_duration("--interval", interval_text, std::chrono::seconds(1),
                                             std::chrono::hours(1));
    if (output.size() < 5 || output.compare(output.size() - 5, 5, ".prom") != 0) {
      throw dl::InputError(
          fmt::format("--output={}: expected a file name ending in .prom", output));
    }
    std::string why;
    const auto nvml = dl::Nvml::load_all(why);
    if (!nvml) throw dl::SystemError(fmt::format("couldn't load NVML: {}", why));

    // SIGTERM and SIGINT end the wait between samples; the file goes with the service, so
    // that node_exporter does not serve the last figures as if they were current.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigprocmask(SIG_BLOCK, &stop, nullptr);
    for (;;) {
      dl::sys::write_file_durably(
          output, dl::format_gpu_metrics(node, read_owners(owners_dir, node), nvml->read()));
      if (once) return 0;
      const timespec wait{static_cast<time_t>(interval.count()), 0};
      if (sigtimedwait(&stop, nullptr, &wait) >= 0) break;
    }
    dl::sys::remove_file(output);
    return 0;
  } catch (const dl::InputError& e) {
    std::cerr << "dl-gpu-metrics: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "dl-gpu-metrics: " << e.what() << "\n";
    return 1;
  }
}
