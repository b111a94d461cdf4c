#!/bin/sh
# scripts/gpu-check's program (tests/gpu/nccl_ckpt.cc) builds and links against the CUDA,
# NCCL and cuBLAS of this machine and the built libdlckpt and libdlclient, so that the
# check is ready for a machine with a GPU. Skipped (77) where CUDA is not installed.
set -u
src=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${top_builddir:-$src/build}
cuda=${DL_CUDA_DIR:-/usr/local/cuda}
for f in include/nccl.h include/cublas_v2.h include/cuda_runtime.h; do
  [ -e "$cuda/$f" ] || { echo "gpu_program: no $cuda/$f: skipped"; exit 77; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
g++ -std=c++17 -Wall -Wextra -Werror -I"$cuda/include" -I"$src/ckpt" -I"$src/client" \
  "$src/tests/gpu/nccl_ckpt.cc" -o "$out/nccl_ckpt" -L"$cuda/lib64" -L"$build/ckpt/.libs" \
  -L"$build/client/.libs" -ldlckpt -ldlclient -lnccl -lcublas -lcudart || exit 1
# Without a device it fails with CUDA's own message, naming the call.
LD_LIBRARY_PATH=$cuda/lib64:$build/ckpt/.libs:$build/client/.libs "$out/nccl_ckpt" --steps 1 \
  >"$out/run.txt" 2>&1
if ls /dev/nvidia[0-9]* >/dev/null 2>&1; then exit 0; fi
grep -q "nccl_ckpt: .*: cudaSetDevice(local): " "$out/run.txt" || { cat "$out/run.txt"; exit 1; }
echo "gpu_program: built; without a GPU it says: $(cat "$out/run.txt")"
