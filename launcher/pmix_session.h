// RAII owner of a PMIx client session (PMIx_Init .. PMIx_Finalize) with one checked
// wrapper per PMIx call. Errors name the namespace, the rank and PMIx's own message.
#pragma once

#include <cstdint>
#include <string>

namespace dl::pmix {

// The PMIx store every client under dlrun must use, set as PMIX_MCA_gds before PMIx_Init
// in dlrun and in the program's environment. PMIx 4.2's shared-memory store (gds/ds21)
// is filled by the first client that connects on a node, and every client that opens it
// takes one of local_size lock slots for good. A second client per rank (dlrun, then the
// MPI library of the program it starts) therefore either takes the slot the program
// needs or leaves the store empty, and Open MPI's MPI_Init aborts. The per-process store
// ("hash") gets the job's data in the connection reply, however many clients connect.
inline constexpr const char* kStoreVariable = "PMIX_MCA_gds";
inline constexpr const char* kStoreValue = "hash";

class Session {
 public:
  // PMIx_Init; throws dl::SystemError when this process was not started by a
  // PMIx-enabled launcher (e.g. plain `srun` without --mpi=pmix).
  Session();
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  Session(Session&&) = delete;
  Session& operator=(Session&&) = delete;

  const std::string& nspace() const { return nspace_; }
  std::uint32_t rank() const { return rank_; }

  std::uint32_t job_size() const;
  std::uint32_t local_size() const;
  std::uint16_t local_rank() const;
  std::uint32_t node_id() const;

  // Publishes key=value to every rank of the job (PMIX_GLOBAL); visible after commit()
  // and a collecting fence.
  void put(const std::string& key, const std::string& value);
  void commit();
  // Blocks until every rank of the namespace arrives, collecting the committed data.
  void fence();
  std::string get(std::uint32_t rank, const std::string& key) const;

 private:
  std::string nspace_;
  std::uint32_t rank_ = 0;
};

}  // namespace dl::pmix
