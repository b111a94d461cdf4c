// The NCCL unique id rank 0 hands to every rank (DL_NCCL_UNIQUE_ID), from libnccl.so.2
// loaded at run time, so that dlrun neither needs CUDA to build nor to run.
#pragma once

#include <memory>
#include <optional>
#include <string>

namespace dl {

class NcclLibrary {
 public:
  // dlopen("libnccl.so.2"), then the CUDA directory configure found. nullopt, with a
  // debug line saying why, when NCCL is not installed.
  static std::optional<NcclLibrary> load();

  // ncclGetUniqueId, as lower-case hex. NCCL starts the bootstrap root's listening
  // thread in this process, so the library stays loaded as long as this object lives.
  std::string unique_id_hex() const;

 private:
  struct Handle;
  explicit NcclLibrary(std::shared_ptr<Handle> handle) : handle_(std::move(handle)) {}
  std::shared_ptr<Handle> handle_;
};

}  // namespace dl
