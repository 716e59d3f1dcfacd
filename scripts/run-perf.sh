#!/usr/bin/env bash
# The main perf job: builds DCCL (cmake + ninja) and runs all_reduce_perf on 2 ranks, 8 B to 64 MiB, every
# result checked, with the MPI baseline beside it.
#
# Usage: scripts/run-perf.sh [--build-dir DIR] [extra all_reduce_perf flags...]
#   Extra flags are passed through and, coming last, override the defaults (e.g. -e 1M, -d all, -J out.json).
# Environment: NP (ranks, default 2), PERF_TOOL (default all_reduce_perf), BUILD_DIR (default ./build).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$repo/build}
if [[ ${1:-} == --build-dir ]]; then
  [[ $# -ge 2 ]] || { echo "usage: $0 [--build-dir DIR] [flags...]" >&2; exit 2; }
  build=$2
  shift 2
fi
np=${NP:-2}
tool=${PERF_TOOL:-all_reduce_perf}

cmake -S "$repo" -B "$build" -G Ninja >/dev/null
ninja -C "$build" "$tool"

launcher=(mpirun -np "$np")
if [[ $(id -u) -eq 0 ]]; then
  launcher+=(--allow-run-as-root --oversubscribe)
fi
# Pinning one rank per core only makes sense while there are enough cores.
if ((np <= $(nproc))); then
  launcher+=(--bind-to core)
else
  launcher+=(--oversubscribe --bind-to none)
fi

set -x
exec "${launcher[@]}" "$build/perf/$tool" -b 8 -e 64M -f 2 -c 1 -M 1 "$@"
