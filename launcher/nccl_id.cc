#include "launcher/nccl_id.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <vector>

#include "config.h"
#include "core/error.h"
#include "core/log.h"
#include "launcher/launch.h"

namespace dl {
namespace {

// From nccl.h: NCCL_UNIQUE_ID_BYTES and the two entry points dlrun calls. Declared here
// so that the build does not need nccl.h.
constexpr std::size_t kUniqueIdBytes = 128;
using GetUniqueIdFn = int (*)(void* id);
using GetErrorStringFn = const char* (*)(int result);

std::vector<std::string> candidates() {
  std::vector<std::string> paths = {"libnccl.so.2"};
#ifdef DL_CUDA_DIR
  paths.push_back(DL_CUDA_DIR "/lib/libnccl.so.2");
  paths.push_back(DL_CUDA_DIR "/lib64/libnccl.so.2");
#endif
  return paths;
}

}  // namespace

// Owns the dlopen handle without ever closing it: ncclGetUniqueId leaves NCCL's
// bootstrap root thread running code of the library until the process ends.
struct NcclLibrary::Handle {
  void* lib = nullptr;
  GetUniqueIdFn get_unique_id = nullptr;
  GetErrorStringFn get_error_string = nullptr;
};

std::optional<NcclLibrary> NcclLibrary::load() {
  std::string why;
  for (const auto& path : candidates()) {
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      why += fmt::format("{}{}", why.empty() ? "" : "; ", dlerror());
      continue;
    }
    auto h = std::make_shared<Handle>();
    h->lib = lib;
    h->get_unique_id = reinterpret_cast<GetUniqueIdFn>(dlsym(lib, "ncclGetUniqueId"));
    h->get_error_string = reinterpret_cast<GetErrorStringFn>(dlsym(lib, "ncclGetErrorString"));
    if (!h->get_unique_id) {
      why += fmt::format("{}{}: no ncclGetUniqueId", why.empty() ? "" : "; ", path);
      dlclose(lib);
      continue;
    }
    return NcclLibrary(std::move(h));
  }
  log(LogLevel::debug, "no NCCL unique id (DL_NCCL_UNIQUE_ID unset): {}", why);
  return std::nullopt;
}

std::string NcclLibrary::unique_id_hex() const {
  unsigned char id[kUniqueIdBytes] = {};
  const int rc = handle_->get_unique_id(id);
  if (rc != 0) {
    throw SystemError(fmt::format(
        "couldn't get an NCCL unique id: {}",
        handle_->get_error_string ? handle_->get_error_string(rc) : std::to_string(rc)));
  }
  return to_hex(id, sizeof id);
}

}  // namespace dl
