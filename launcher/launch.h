// What dlrun computes for one task before it starts the training program: the rank
// layout, the rendezvous that rank 0 chooses and one PMIx fence distributes, and the
// environment the program gets (torchrun's names plus DL_*). Pure: dlrun's adapters
// supply PMIx answers, addresses and ports.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dl {

struct RankLayout {
  std::uint32_t rank = 0;
  std::uint32_t world_size = 1;
  std::uint32_t local_rank = 0;
  std::uint32_t local_world_size = 1;
  std::uint32_t node_rank = 0;  // torchrun's GROUP_RANK
};

// Chosen by rank 0, the same for every rank.
struct Rendezvous {
  std::string master_addr;
  std::uint16_t master_port = 0;
  std::uint16_t control_port = 0;  // dlrun's coordination channel, on master_addr
  std::string node;                // rank 0's node (SLURMD_NODENAME)
  std::string nccl_id_hex;         // empty when libnccl.so.2 is not available
  std::string resume_from;         // empty when there is no checkpoint to resume from
  std::int64_t resume_step = -1;   // the step of resume_from
  // The step's secret (hex) that authenticates a rank to rank 0's control port. Only in
  // the PMIx fence: never in the program's environment, argv or a file.
  std::string secret;
  // Set instead of the rest when rank 0 could not choose: the other ranks report it
  // rather than wait in the fence for a rank that has given up.
  std::string error;
};

// One string for a PMIx value, and back. decode_rendezvous throws dl::SystemError
// naming what is wrong: the data comes from rank 0's dlrun, not from a user.
std::string encode_rendezvous(const Rendezvous& r);
Rendezvous decode_rendezvous(std::string_view text);

// Lower-case hex of `bytes`, e.g. the 128 bytes of an ncclUniqueId.
std::string to_hex(const void* bytes, std::size_t size);

struct TaskContext {
  RankLayout layout;
  Rendezvous rendezvous;
  std::uint32_t restart_count = 0;
  std::string ckpt_dir;       // empty: the job has no checkpoint directory
  std::string client_file;    // the shared page the client APIs poll (DL_CLIENT_FILE)
  std::string socket_ifname;  // this node's interface towards MASTER_ADDR; empty: unknown
};

// Variables to set, variables to remove (stale values a requeued job inherits), and
// defaults that only apply when the user has not set the variable.
struct EnvChanges {
  std::vector<std::pair<std::string, std::string>> set;
  std::vector<std::string> unset;
  std::vector<std::pair<std::string, std::string>> defaults;
};

// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT,
// TORCHELASTIC_RESTART_COUNT (as torchrun sets them), DL_RESTART_COUNT, DL_CKPT_DIR,
// DL_RESUME_FROM, DL_NCCL_UNIQUE_ID, DL_CLIENT_FILE; GLOO_SOCKET_IFNAME and
// NCCL_SOCKET_IFNAME as defaults.
EnvChanges program_env(const TaskContext& task);

// `base` ("NAME=value" entries, as in environ) with `changes` applied; order kept,
// new variables appended.
std::vector<std::string> apply_env(const std::vector<std::string>& base, const EnvChanges& changes);

// Where dlrun, running from `own_dir`, looks for `module` (its checkpoint library), in
// order: libtool's .libs beside it (a build tree); `pkglibdir` under the same root as
// dlrun when `own_dir` is `bindir` below some root (a staged `make install
// DESTDIR=ROOT`, or an installed tree copied elsewhere); `pkglibdir` itself. All paths
// are absolute and as configured (no trailing slash).
std::vector<std::string> module_paths(std::string_view own_dir, std::string_view bindir,
                                      std::string_view pkglibdir, std::string_view module);

}  // namespace dl
