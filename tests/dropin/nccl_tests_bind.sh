#!/usr/bin/env bash
# NCCL's perf tests (NVIDIA's nccl-tests, from ../shared/third_party/nccl-tests: built beside DCCL, never copied
# in), built against NVIDIA's nccl.h with MPI=1, load against DCCL's libnccl.so.2 with every symbol bound at
# load (LD_BIND_NOW): for each *_perf binary, libnccl.so.2 resolves to DCCL's and no symbol is left undefined.
# The build goes to DCCL_BUILD_DIR/nccl-tests (about 2.5 minutes on 2 cores; make keeps it for the next run).
# Exits 77 (skipped) where the sources, NVIDIA's header or mpicc are missing.
# Usage: nccl_tests_bind.sh DCCL_BUILD_DIR NCCL_TESTS_SRC [CUDA_HOME=/usr/local/cuda]
set -euo pipefail
build=$(cd "$1" && pwd)
src=$2
cuda=${3:-/usr/local/cuda}
out=$build/nccl-tests
[ -d "$src/src" ] || { echo "SKIP: no nccl-tests sources at $src"; exit 77; }
[ -e "$cuda/include/nccl.h" ] || { echo "SKIP: no NVIDIA nccl.h under $cuda"; exit 77; }
command -v mpicc > /dev/null || { echo "SKIP: no mpicc"; exit 77; }
mpi_home=$(dirname "$(mpicc --showme:incdirs | tr ' ' '\n' | head -1)")
mkdir -p "$out"
if ! make -C "$src/src" MPI=1 MPI_HOME="$mpi_home" NCCL_HOME="$cuda" CUDA_HOME="$cuda" BUILDDIR="$out" \
     NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" -j2 > "$out/build.log" 2>&1; then
  tail -20 "$out/build.log"
  echo "FAIL: building nccl-tests"
  exit 1
fi
fail=0
n=0
for bin in "$out"/*_perf; do
  n=$((n + 1))
  deps=$(LD_LIBRARY_PATH="$build:$cuda/lib64" LD_BIND_NOW=1 ldd -r "$bin" 2>&1)
  if ! grep -q "libnccl.so.2 => $build/libnccl.so.2 " <<< "$deps"; then
    echo "FAIL: $(basename "$bin") does not load DCCL's libnccl.so.2:"
    grep nccl <<< "$deps"
    fail=1
  fi
  if grep -E "undefined symbol|not found" <<< "$deps"; then
    echo "FAIL: $(basename "$bin") has unresolved imports (above)"
    fail=1
  fi
done
[ "$n" -gt 0 ] || { echo "FAIL: no *_perf binary in $out"; exit 1; }
[ $fail = 0 ] && echo "PASS: $n nccl-tests binaries bind every symbol against DCCL's libnccl.so.2" || exit 1
