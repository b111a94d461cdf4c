// The rank bootstrap: through PMIx, each task learns its rank, the world size, its local
// rank and size and its node's rank; rank 0 chooses MASTER_ADDR, MASTER_PORT, the NCCL
// unique id, the checkpoint to resume from and its own control port, and one fence hands
// them to every rank.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/net.h"
#include "launcher/launch.h"
#include "launcher/nccl_id.h"
#include "launcher/pmix_session.h"
#include "launcher/resume.h"

namespace dl {

struct Bootstrap {
  RankLayout layout;
  Rendezvous rendezvous;
  // Finalized (reset) once the program has ended. The program's PMIx client (MPI_Init)
  // has the same rank as dlrun's: when dlrun's client left while the program was in its
  // first fence, the node's PMIx server released that fence locally with no data and
  // never passed the node's part on, and every rank hung in MPI_Init (Slurm 22.05, PMIx
  // 4.2, on a loaded node: 2 starts in 131 over TCP, 14 in 30 over UCX, whose MPI_Init
  // fences sooner; also when dlrun's client left just before the program started).
  std::unique_ptr<pmix::Session> pmix;
  // Rank 0 only:
  std::optional<net::Listener> control;
  std::optional<NcclLibrary> nccl;  // keeps NCCL's bootstrap root alive
  std::optional<ResumePoint> resume;
};

// `node`: this task's node (SLURMD_NODENAME), which rank 0 hands out too. `resume`: how
// rank 0 chooses the checkpoint it hands out as DL_RESUME_FROM (none without a
// checkpoint directory). Throws
// dl::SystemError (PMIx, sockets: naming nspace, rank and the reason; a checkpoint directory that
// cannot be read).
Bootstrap bootstrap(const std::string& node, const ResumeRequest& resume);

// Rank 0's part of the bootstrap without PMIx, for ranks dlrun starts itself on one node
// (launcher/local_ranks.h): the rendezvous on `master_addr` (its control port, a
// MASTER_PORT from SLURM_STEP_RESV_PORTS or a free one, the NCCL id, the checkpoint to
// resume from) into b.rendezvous, b.control, b.nccl and b.resume; on failure only
// b.rendezvous.error, for the other ranks to report.
void choose_local_rendezvous(Bootstrap& b, const std::string& node, const ResumeRequest& resume,
                             const std::string& master_addr);

}  // namespace dl
