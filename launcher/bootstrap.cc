#include "launcher/bootstrap.h"

#include <fmt/format.h>

#include <cstdlib>
#include <future>

#include "core/error.h"
#include "core/log.h"
#include "launcher/control.h"
#include "launcher/pmix_session.h"
#include "launcher/ports.h"

namespace dl {
namespace {

constexpr const char* kRendezvousKey = "dl.rendezvous";

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// An address of this node that the other nodes reach: the one the kernel uses towards
// the node srun runs on (slurmd reaches srun through it too). In a network namespace
// that is the namespace's own address.
std::string choose_master_addr() {
  const std::string launch = env_or_empty("SLURM_LAUNCH_NODE_IPADDR");
  if (!launch.empty()) return net::local_address_towards(launch);
  return net::host_address();
}

std::uint16_t choose_master_port(std::uint16_t control_port) {
  const std::string reserved = env_or_empty("SLURM_STEP_RESV_PORTS");
  if (reserved.empty()) {
    // Without MpiParams=ports Slurm reserves nothing: take a port the kernel considers
    // free now. Another job could still bind it before the program does.
    const net::Listener probe = net::listen_on_any_port("0.0.0.0");
    log(LogLevel::verbose,
        "no SLURM_STEP_RESV_PORTS (set MpiParams=ports=... in slurm.conf): MASTER_PORT={} is "
        "free now but not reserved",
        probe.port);
    return probe.port;
  }
  const auto port = first_free_port(parse_port_list(reserved), [&](std::uint16_t p) {
    return p != control_port && net::tcp_port_free(p);
  });
  if (!port) {
    throw SystemError(fmt::format(
        "couldn't choose MASTER_PORT: every port Slurm reserved for this step ({}) is in use",
        reserved));
  }
  return *port;
}

struct NcclId {
  std::optional<NcclLibrary> library;
  std::string hex;
};

NcclId nccl_id() {
  NcclId id;
  id.library = NcclLibrary::load();
  if (id.library) id.hex = id.library->unique_id_hex();
  return id;
}

// Rank 0's choices, into `b`; on failure the rendezvous carries the error instead, so
// that the other ranks learn why rather than wait. `master_addr` empty: the address
// the other nodes reach. `nccl` and `resume` may hold results started early.
void choose_as_rank0(Bootstrap& b, const std::string& node, const ResumeRequest& request,
                     const std::string& master_addr, std::future<NcclId>& nccl,
                     std::future<std::optional<ResumePoint>>& resume) {
  Rendezvous& r = b.rendezvous;
  try {
    r.master_addr = master_addr.empty() ? choose_master_addr() : master_addr;
    r.secret = new_step_secret();
    // Only on the address the other ranks are told to connect to, not every address.
    b.control = net::listen_on_any_port(r.master_addr);
    r.control_port = b.control->port;
    r.node = node;
    r.master_port = choose_master_port(r.control_port);
    NcclId id = nccl.valid() ? nccl.get() : nccl_id();
    b.nccl = std::move(id.library);
    r.nccl_id_hex = std::move(id.hex);
    if (!request.ckpt_dir.empty()) {
      b.resume = resume.valid() ? resume.get() : choose_resume(request);
      if (b.resume) {
        r.resume_from = b.resume->path;
        r.resume_step = b.resume->step;
      }
    }
  } catch (const std::exception& e) {
    r = Rendezvous{};
    r.error = e.what();
  }
}

}  // namespace

void choose_local_rendezvous(Bootstrap& b, const std::string& node, const ResumeRequest& request,
                             const std::string& master_addr) {
  std::future<NcclId> nccl;
  std::future<std::optional<ResumePoint>> resume;
  choose_as_rank0(b, node, request, master_addr, nccl, resume);
}

Bootstrap bootstrap(const std::string& node, const ResumeRequest& request) {
  const std::string& ckpt_dir = request.ckpt_dir;
  // The environment is changed (here and by PMIx_Init, which adds its own variables)
  // before rank 0 starts the threads below: setenv may move the environment while
  // another thread's getenv reads it (loading NCCL or HDF5 reads variables), and a
  // rank 0 that started them first crashed in getenv (SIGSEGV) now and then, leaving
  // the other ranks in the fence. Then rank 0 loads NCCL (tens of ms when cold) and
  // looks for the checkpoint to resume from at the same time.
  setenv(pmix::kStoreVariable, pmix::kStoreValue, 1);
  Bootstrap b;
  b.pmix = std::make_unique<pmix::Session>();
  pmix::Session& pmix = *b.pmix;
  b.layout.rank = pmix.rank();
  b.layout.world_size = pmix.job_size();
  b.layout.local_rank = pmix.local_rank();
  b.layout.local_world_size = pmix.local_size();
  b.layout.node_rank = pmix.node_id();
  std::future<NcclId> nccl;
  std::future<std::optional<ResumePoint>> resume;
  if (b.layout.rank == 0) {
    nccl = std::async(std::launch::async, nccl_id);
    if (!ckpt_dir.empty()) {
      resume = std::async(std::launch::async, choose_resume, request);
    }
    // Still joins the fence on failure, so that the other ranks learn why.
    choose_as_rank0(b, node, request, "", nccl, resume);
    pmix.put(kRendezvousKey, encode_rendezvous(b.rendezvous));
  }
  pmix.commit();
  pmix.fence();
  if (b.layout.rank != 0) b.rendezvous = decode_rendezvous(pmix.get(0, kRendezvousKey));
  if (!b.rendezvous.error.empty()) {
    throw SystemError(b.layout.rank == 0 ? b.rendezvous.error
                                         : "rank 0 could not start: " + b.rendezvous.error);
  }
  return b;
}

}  // namespace dl
