// scripts/gpu-check's program, one rank per GPU under dlrun: a cuBLAS matrix product
// keeps the GPU busy (for NVML's figures), an NCCL all-reduce runs on a device buffer,
// and the buffer is checkpointed from GPU memory (copied to the host, saved with
// libdlckpt) and restored into it on resume. The buffer's value after step k is known
// (x = mean of the first values + k), so a resumed run that repeated or skipped a step
// is off by at least 1.
//
//   dlrun nccl_ckpt --steps N [--size FLOATS] [--matrix M]
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dl/ckpt.h>
#include <dl/client.h>
#include <optional>
#include <string>
#include <vector>

namespace {

#define CHECK_CUDA(call)                                                                       \
  do {                                                                                         \
    const cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess) fail(#call, cudaGetErrorString(e_), __FILE__, __LINE__);            \
  } while (0)
#define CHECK_NCCL(call)                                                                       \
  do {                                                                                         \
    const ncclResult_t r_ = (call);                                                            \
    if (r_ != ncclSuccess) fail(#call, ncclGetErrorString(r_), __FILE__, __LINE__);            \
  } while (0)
#define CHECK_CUBLAS(call)                                                                     \
  do {                                                                                         \
    const cublasStatus_t s_ = (call);                                                          \
    if (s_ != CUBLAS_STATUS_SUCCESS) fail(#call, "cuBLAS error", __FILE__, __LINE__);          \
  } while (0)

[[noreturn]] void fail(const char* call, const char* what, const char* file, int line) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::fprintf(stderr, "nccl_ckpt: %s: %s:%d: %s: %s\n", host, file, line, call, what);
  std::exit(1);
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// DL_NCCL_UNIQUE_ID: 128 bytes as 256 lower-case hex digits.
ncclUniqueId unique_id() {
  const char* hex = std::getenv("DL_NCCL_UNIQUE_ID");
  if (!hex || std::strlen(hex) != 2 * sizeof(ncclUniqueId)) {
    std::fprintf(stderr, "nccl_ckpt: DL_NCCL_UNIQUE_ID is not set: run it under dlrun\n");
    std::exit(2);
  }
  ncclUniqueId id;
  for (std::size_t i = 0; i < sizeof id.internal; ++i) {
    unsigned byte = 0;
    std::sscanf(hex + 2 * i, "%2x", &byte);
    id.internal[i] = static_cast<char>(byte);
  }
  return id;
}

}  // namespace

int main(int argc, char** argv) {
  long steps = 200, size = 1 << 20;
  int matrix = 2048;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--steps") steps = std::atol(argv[i + 1]);
    if (a == "--size") size = std::atol(argv[i + 1]);
    if (a == "--matrix") matrix = std::atoi(argv[i + 1]);
  }
  const int rank = env_int("RANK", 0), world = env_int("WORLD_SIZE", 1);
  const int local = env_int("LOCAL_RANK", 0);
  CHECK_CUDA(cudaSetDevice(local));
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, world, unique_id(), rank));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  cublasHandle_t blas;
  CHECK_CUBLAS(cublasCreate(&blas));
  CHECK_CUBLAS(cublasSetStream(blas, stream));

  // Each rank starts with rank + 1 everywhere: after step k every value is the mean of
  // those, (world + 1) / 2, plus k.
  std::vector<float> host(static_cast<std::size_t>(size), static_cast<float>(rank + 1));
  long first = 0;
  if (const auto from = dl::resume_path()) {
    const auto reader = dl::ckpt::Reader::open(*from);
    reader.read("x", dl::ckpt::DType::f32, host.data());
    first = static_cast<long>(reader.metadata().step) + 1;
    if (rank == 0) std::printf("resumed from %s (step %ld)\n", from->c_str(), first - 1);
  }
  float *x = nullptr, *a = nullptr, *c = nullptr;
  CHECK_CUDA(cudaMalloc(&x, host.size() * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&a, sizeof(float) * matrix * matrix));
  CHECK_CUDA(cudaMalloc(&c, sizeof(float) * matrix * matrix));
  CHECK_CUDA(cudaMemset(a, 0, sizeof(float) * matrix * matrix));
  CHECK_CUDA(cudaMemcpy(x, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));

  std::optional<dl::ckpt::Checkpointer> ckpt;
  if (std::getenv("DL_CKPT_DIR")) ckpt.emplace(dl::ckpt::Options::from_env());
  const float one = 1.0f, zero = 0.0f, inv = 1.0f / static_cast<float>(world);
  std::vector<float> ones(host.size(), 1.0f);
  float* d_ones = nullptr;
  CHECK_CUDA(cudaMalloc(&d_ones, ones.size() * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(d_ones, ones.data(), ones.size() * sizeof(float), cudaMemcpyHostToDevice));
  for (long step = first; step < steps; ++step) {
    for (int k = 0; k < 8; ++k) {  // the GPU's work, for NVML to see
      CHECK_CUBLAS(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, matrix, matrix, matrix, &one, a,
                               matrix, a, matrix, &zero, c, matrix));
    }
    CHECK_NCCL(ncclAllReduce(x, x, host.size(), ncclFloat, ncclSum, comm, stream));
    CHECK_CUBLAS(cublasSscal(blas, static_cast<int>(host.size()), &inv, x, 1));
    CHECK_CUBLAS(cublasSaxpy(blas, static_cast<int>(host.size()), &one, d_ones, 1, x, 1));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    dl::report_step(step);
    if (ckpt && dl::should_checkpoint()) {
      CHECK_CUDA(cudaMemcpy(host.data(), x, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
      dl::ckpt::State state;
      state.meta.step = static_cast<std::uint64_t>(step);
      // Every rank holds the whole buffer: each saves its share of the rows.
      const std::uint64_t n = host.size(), lo = n * rank / world, hi = n * (rank + 1) / world;
      state.tensors.push_back(
          {"x", dl::ckpt::DType::f32, {hi - lo}, host.data() + lo, {n}, {lo}});
      ckpt->save(state);
      dl::checkpoint_done(step);
      if (rank == 0) std::printf("checkpoint step %ld from GPU memory\n", step);
    }
  }
  CHECK_CUDA(cudaMemcpy(host.data(), x, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
  const float want = static_cast<float>(world + 1) / 2 + static_cast<float>(steps);
  long wrong = 0;
  for (float v : host) wrong += std::fabs(v - want) > 0.01f;
  if (rank == 0) {
    std::printf("final step %ld value %.1f expected %.1f wrong %ld\n", steps - 1, host[0], want,
                wrong);
  }
  ncclCommDestroy(comm);
  return wrong == 0 ? 0 : 1;
}
