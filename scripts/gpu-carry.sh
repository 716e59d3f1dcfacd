#!/usr/bin/env bash
# Prepares what a device call carries for the drop-in runs (scripts/gpu-lab-dropin.sh): the GPU machine gets only
# the repository (../shared stays behind, and symbolic links travel as links), so NVIDIA's nccl-tests are built
# here against NVIDIA's nccl.h (tests/dropin/nccl_tests_bind.sh, into BUILD_DIR/nccl-tests) and packed, with DCCL's
# libraries and perf tools, into CARRY/dropin.tar.gz (CARRY: an ignored folder, default build-carry; every binary
# stripped and compressed: about 13 MiB, where the carried tree may hold 64), with the GPU test programs gpu_colls,
# gpu_graphs, gpu_ce_bits and coll_suite (run with LD_LIBRARY_PATH=/tmp/c). Then, on the device:
#   run(command="mkdir -p /tmp/c && tar -xzf build-carry/dropin.tar.gz -C /tmp/c &&
#                bash scripts/gpu-lab-dropin.sh /tmp/c /tmp/c/nccl-tests $OUT/dropin", carry=["build-carry"])
# Usage: [GPU_CARRY_BASE=BASE_BUILD_DIR] [GPU_CARRY_STAGES=STAGES_BUILD_DIR] scripts/gpu-carry.sh [BUILD_DIR=build] [CARRY=build-carry]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
carry=${2:-$repo/build-carry}
ninja -C "$build" nccl_dropin gpu_colls gpu_graphs gpu_ce_bits coll_suite all_reduce_perf all_gather_perf broadcast_perf reduce_perf reduce_scatter_perf \
  alltoall_perf sendrecv_perf inproc_allreduce > /dev/null
bash "$repo/tests/dropin/nccl_tests_bind.sh" "$build" "$repo/../shared/third_party/nccl-tests" > /dev/null
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/nccl-tests" "$stage/perf" "$stage/tests"
for lib in libnccl.so.2 libdccl.so.0 libdccl_mpi.so.0; do cp "$(readlink -f "$build/$lib")" "$stage/$lib"; done
cp "$build"/nccl-tests/*_perf "$stage/nccl-tests/"
for t in all_reduce all_gather broadcast reduce reduce_scatter alltoall sendrecv; do cp "$build/perf/${t}_perf" "$stage/perf/"; done
cp "$build/perf/inproc_allreduce" "$stage/perf/"
# GPU test programs, to check a change without building on the device (LD_LIBRARY_PATH finds the library).
cp "$build/tests/gpu_colls" "$build/tests/gpu_graphs" "$build/tests/gpu_ce_bits" "$build/tests/coll_suite" "$stage/tests/"
strip --strip-unneeded "$stage"/*.so.* "$stage"/nccl-tests/* "$stage"/perf/* "$stage"/tests/*
rm -rf "$carry"
mkdir -p "$carry"
tar -czf "$carry/dropin.tar.gz" -C "$stage" .

# The GPU suite's build (gpu-lab.sh's targets, ctest's files) in its own layout, for GPU_LAB_PREBUILT: executables
# not among the targets, objects and build-system files stay behind.
ninja -C "$build" $(cat "$repo/scripts/gpu-targets.txt") > /dev/null
# The CUPTI tracer of the paths part `trace` (perf/gpu/kernel_trace.c), where this toolkit has CUPTI.
if ninja -C "$build" -t targets all | grep -q '^dccl_kernel_trace:'; then
  ninja -C "$build" dccl_kernel_trace > /dev/null
fi
targets=" $(tr '\n' ' ' < "$repo/scripts/gpu-targets.txt") "
rm -rf "$stage" && mkdir -p "$stage"
(cd "$build" && find . \( -name CMakeFiles -o -name nccl-tests -o -name Testing \) -prune -o -type f \
   ! -name '*.o' ! -name '*.a' ! -name '.ninja_*' ! -name build.ninja ! -name '*fatbin*' -print) |
  while read -r f; do
    if [ "$(head -c 4 "$build/$f")" = $'\x7fELF' ]; then
      case $f in *.so*) ;; *) [[ $targets == *" $(basename "$f") "* ]] || continue ;; esac
    fi
    mkdir -p "$stage/$(dirname "$f")" && cp -P "$build/$f" "$stage/$f"
  done
(cd "$build" && find . -name CMakeFiles -prune -o -type l -print) | while read -r l; do cp -P "$build/$l" "$stage/$l"; done
find "$stage" -type f -name '*' -exec sh -c 'head -c 4 "$1" | grep -q ELF && strip --strip-unneeded "$1"' _ {} \;
# Where it was built (ctest's paths name it), the build's path in the checkout, and the code it was built from.
printf '%s\n%s\n%s\n' "$repo" "$(realpath --relative-to="$repo" "$build")" \
  "$(git -C "$repo" describe --always --dirty 2>/dev/null || echo unknown)" > "$stage/carried-from"
tar -czf "$carry/gpu-build.tar.gz" -C "$stage" .
du -sh "$carry/gpu-build.tar.gz"

# Another build's library alone, stripped, with the code it was built from, as CARRY/NAME.
pack_lib() { # pack_lib BUILD_DIR NAME
  local src
  src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$1/CMakeCache.txt")
  ninja -C "$1" dccl > /dev/null
  rm -rf "$stage" && mkdir -p "$stage"
  cp "$(readlink -f "$1/libdccl.so.0")" "$stage/libdccl.so.0"
  strip --strip-unneeded "$stage/libdccl.so.0"
  git -C "$src" describe --always --dirty > "$stage/carried-from" 2>/dev/null || echo unknown > "$stage/carried-from"
  tar -czf "$carry/$2" -C "$stage" .
  du -sh "$carry/$2"
}
# GPU_CARRY_BASE=BUILD_DIR: the code before a kernel change, as CARRY/base-lib.tar.gz, for the paths part `ab`
# (scripts/gpu-lab-paths.sh: PATHS_AB_BASE=build-carry/base-lib.tar.gz).
[ -n "${GPU_CARRY_BASE:-}" ] && pack_lib "$GPU_CARRY_BASE" base-lib.tar.gz
# GPU_CARRY_STAGES=BUILD_DIR: a build configured with -DDCCL_DEV_STAGES=ON, as CARRY/stages-lib.tar.gz, for the
# paths part `stages` (PATHS_STAGES_LIB=build-carry/stages-lib.tar.gz) instead of a build on the device.
if [ -n "${GPU_CARRY_STAGES:-}" ]; then
  grep -q '^DCCL_DEV_STAGES:BOOL=ON' "$GPU_CARRY_STAGES/CMakeCache.txt" ||
    { echo "gpu-carry: $GPU_CARRY_STAGES is not configured with -DDCCL_DEV_STAGES=ON"; exit 1; }
  pack_lib "$GPU_CARRY_STAGES" stages-lib.tar.gz
fi
du -sh "$carry/dropin.tar.gz"
