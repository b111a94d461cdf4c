#include "launcher/pmix_session.h"

#include <fmt/format.h>
#include <pmix.h>

#include <memory>

#include "core/error.h"

namespace dl::pmix {
namespace {

struct ValueDeleter {
  void operator()(pmix_value_t* v) const noexcept { PMIX_VALUE_RELEASE(v); }
};
using ValuePtr = std::unique_ptr<pmix_value_t, ValueDeleter>;

[[noreturn]] void fail(const std::string& what, const std::string& nspace, std::uint32_t rank,
                       pmix_status_t rc) {
  throw SystemError(fmt::format("couldn't {} (nspace {}, rank {}): {}", what, nspace, rank,
                                PMIx_Error_string(rc)));
}

pmix_proc_t proc_of(const std::string& nspace, pmix_rank_t rank) {
  pmix_proc_t proc;
  PMIX_PROC_CONSTRUCT(&proc);
  PMIX_LOAD_PROCID(&proc, nspace.c_str(), rank);
  return proc;
}

ValuePtr get_value(const std::string& nspace, std::uint32_t me, pmix_rank_t rank, const char* key) {
  const pmix_proc_t proc = proc_of(nspace, rank);
  pmix_value_t* raw = nullptr;
  const pmix_status_t rc = PMIx_Get(&proc, key, nullptr, 0, &raw);
  ValuePtr value(raw);
  if (rc != PMIX_SUCCESS) fail(fmt::format("get {}", key), nspace, me, rc);
  if (!value) fail(fmt::format("get {}", key), nspace, me, PMIX_ERR_NOT_FOUND);
  return value;
}

template <typename T>
T get_number(const std::string& nspace, std::uint32_t me, pmix_rank_t rank, const char* key) {
  const ValuePtr v = get_value(nspace, me, rank, key);
  switch (v->type) {
    case PMIX_UINT32: return static_cast<T>(v->data.uint32);
    case PMIX_UINT16: return static_cast<T>(v->data.uint16);
    case PMIX_PROC_RANK: return static_cast<T>(v->data.rank);
    case PMIX_UINT64: return static_cast<T>(v->data.uint64);
    default:
      throw SystemError(fmt::format("couldn't get {} (nspace {}, rank {}): unexpected type {}", key,
                                    nspace, me, PMIx_Data_type_string(v->type)));
  }
}

}  // namespace

Session::Session() {
  pmix_proc_t me;
  PMIX_PROC_CONSTRUCT(&me);
  const pmix_status_t rc = PMIx_Init(&me, nullptr, 0);
  if (rc != PMIX_SUCCESS) {
    throw SystemError(
        fmt::format("couldn't initialize PMIx: {} (start the program with "
                    "`srun --mpi=pmix ...`)",
                    PMIx_Error_string(rc)));
  }
  nspace_ = me.nspace;
  rank_ = me.rank;
}

Session::~Session() { PMIx_Finalize(nullptr, 0); }

std::uint32_t Session::job_size() const {
  return get_number<std::uint32_t>(nspace_, rank_, PMIX_RANK_WILDCARD, PMIX_JOB_SIZE);
}

std::uint32_t Session::local_size() const {
  return get_number<std::uint32_t>(nspace_, rank_, PMIX_RANK_WILDCARD, PMIX_LOCAL_SIZE);
}

std::uint16_t Session::local_rank() const {
  return get_number<std::uint16_t>(nspace_, rank_, rank_, PMIX_LOCAL_RANK);
}

std::uint32_t Session::node_id() const {
  return get_number<std::uint32_t>(nspace_, rank_, rank_, PMIX_NODEID);
}

void Session::put(const std::string& key, const std::string& value) {
  pmix_value_t v;
  PMIX_VALUE_CONSTRUCT(&v);
  v.type = PMIX_STRING;
  v.data.string = const_cast<char*>(value.c_str());  // PMIx_Put copies; it never writes
  const pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key.c_str(), &v);
  if (rc != PMIX_SUCCESS) fail(fmt::format("put {}", key), nspace_, rank_, rc);
}

void Session::commit() {
  const pmix_status_t rc = PMIx_Commit();
  if (rc != PMIX_SUCCESS) fail("commit", nspace_, rank_, rc);
}

void Session::fence() {
  const pmix_proc_t all = proc_of(nspace_, PMIX_RANK_WILDCARD);
  pmix_info_t info;
  PMIX_INFO_CONSTRUCT(&info);
  bool collect = true;
  PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  const pmix_status_t rc = PMIx_Fence(&all, 1, &info, 1);
  PMIX_INFO_DESTRUCT(&info);
  if (rc != PMIX_SUCCESS) fail("fence", nspace_, rank_, rc);
}

std::string Session::get(std::uint32_t rank, const std::string& key) const {
  const ValuePtr v = get_value(nspace_, rank_, rank, key.c_str());
  if (v->type != PMIX_STRING || v->data.string == nullptr) {
    throw SystemError(fmt::format("couldn't get {} of rank {} (nspace {}, rank {}): not a string",
                                  key, rank, nspace_, rank_));
  }
  return v->data.string;
}

}  // namespace dl::pmix
