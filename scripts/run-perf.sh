#!/usr/bin/env bash
# The main perf job: installs the build dependencies (scripts/install-deps.sh build), builds DCCL (cmake + ninja)
# and runs all_reduce_perf on 2 ranks, 8 B to 64 MiB, every result checked, with the MPI baseline beside it.
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

bash "$repo/scripts/install-deps.sh" build
cmake -S "$repo" -B "$build" -G Ninja >/dev/null
# The perf tools exist only where CMake found MPI: say so rather than leave it to ninja's "unknown target".
if ! ninja -C "$build" -t query "$tool" >/dev/null 2>&1; then
  echo "run-perf: the build has no target '$tool': the perf tools need MPI (the MPI C compiler wrapper, headers" \
       "and libraries; on Debian libopenmpi-dev and openmpi-bin), which CMake did not find." \
       "Install MPI and run again." >&2
  exit 1
fi
if ! command -v mpirun >/dev/null 2>&1; then
  echo "run-perf: mpirun is not on PATH (on Debian it comes with openmpi-bin); install it and run again." >&2
  exit 1
fi
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
