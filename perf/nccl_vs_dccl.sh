#!/usr/bin/env bash
# NVIDIA's NCCL against DCCL's libnccl.so.2 under the same NCCL perf tests (nccl-tests, from
# ../shared/third_party/nccl-tests, built once against NVIDIA's nccl.h, never copied in). Each binary runs with one
# library, then the other, alternating which goes first from round to round; NCCL_NVLS_ENABLE=0 for every run.
# First a correctness pass per library (-c 1, small sizes), then the timed rounds (-c 0). The report (a markdown
# table of busbw at 256 MiB, 1 GiB and, for all-reduce, 8 GiB, and times at 8 B, 1 KiB and 64 KiB, with the ratio
# DCCL/NCCL, medians over the rounds; and a PNG of busbw against size) comes from perf/nccl_vs_dccl_report.py.
# Also saved: the topology DCCL logs at creation (topology.txt).
# Usage: perf/nccl_vs_dccl.sh [DCCL_BUILD_DIR=build-gpu] [OUT_DIR=nccl-vs-dccl-out]
# Environment: NVD_GPUS (GPU counts to run, default every one of 1 2 4 8 the machine has), NVD_COLLS (default
# all_reduce broadcast all_gather reduce_scatter sendrecv), NVD_ROUNDS (2), NVD_ITERS (20), NVD_MAX (1G),
# NVD_AR_MAX (8G), NVD_BUILD_ONLY (set: build nccl-tests into OUT_DIR/nccl-tests and stop), NVD_RANKS_PER_GPU (1; more runs DCCL alone on one GPU under MPS, since NVIDIA's NCCL refuses two
# ranks on one GPU), NCCL_TESTS_SRC, NCCL_HOME (where NVIDIA's include/nccl.h is), NVD_TESTS_BIN (a folder of
# nccl-tests binaries built elsewhere, as scripts/gpu-carry.sh packs them: no build here).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:-build-gpu}" && pwd) || exit 2
out=${2:-nccl-vs-dccl-out}
mkdir -p "$out" && out=$(cd "$out" && pwd)
src=${NCCL_TESTS_SRC:-$here/../../shared/third_party/nccl-tests}
[ -e "$build/libnccl.so.2" ] || { echo "nccl_vs_dccl: no $build/libnccl.so.2 (build DCCL first)"; exit 2; }
[ -n "${NVD_TESTS_BIN:-}" ] || [ -d "$src/src" ] || { echo "nccl_vs_dccl: no nccl-tests sources at $src"; exit 2; }
nccl_home=${NCCL_HOME:-}
for d in /usr/local/cuda /usr; do [ -z "$nccl_home" ] && [ -e "$d/include/nccl.h" ] && nccl_home=$d; done
[ -n "$nccl_home" ] || { echo "nccl_vs_dccl: no NVIDIA nccl.h (set NCCL_HOME)"; exit 2; }
nvidia_lib=$(ldconfig -p | awk '/libnccl\.so\.2 / {print $NF; exit}')
[ -n "$nvidia_lib" ] || nvidia_lib=$nccl_home/lib64/libnccl.so.2
[ -e "$nvidia_lib" ] || { echo "nccl_vs_dccl: NVIDIA's libnccl.so.2 not found"; exit 2; }
nvidia_dir=$(dirname "$(readlink -f "$nvidia_lib")")
echo "NVIDIA NCCL: $nvidia_lib ($(strings "$nvidia_lib" | grep -m1 -o 'NCCL version [0-9.a-z+]*' || echo version unknown))"
echo "DCCL: $build/libnccl.so.2"

# nccl-tests, built once against NVIDIA's header (the binaries then load whichever libnccl.so.2 comes first).
tests=${NVD_TESTS_BIN:-$out/nccl-tests}
mpi_home=$(dirname "$(mpicc --showme:incdirs | tr ' ' '\n' | head -1)")
if [ -z "${NVD_TESTS_BIN:-}" ] && ! make -C "$src/src" -j"$(nproc)" MPI=1 MPI_HOME="$mpi_home" NCCL_HOME="$nccl_home" CUDA_HOME=/usr/local/cuda \
     BUILDDIR="$tests" > "$out/build.log" 2>&1; then
  tail -20 "$out/build.log"
  echo "nccl_vs_dccl: building nccl-tests failed"
  exit 1
fi
[ -n "${NVD_BUILD_ONLY:-}" ] && { echo "nccl_vs_dccl: nccl-tests built in $tests"; exit 0; }

ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$ngpus" -gt 0 ] || { echo "nccl_vs_dccl: no GPU"; exit 2; }
counts=${NVD_GPUS:-$(for g in 1 2 4 8; do [ "$g" -le "$ngpus" ] && echo "$g"; done)}
colls=${NVD_COLLS:-all_reduce broadcast all_gather reduce_scatter sendrecv}
rounds=${NVD_ROUNDS:-2}
iters=${NVD_ITERS:-20}
rpg=${NVD_RANKS_PER_GPU:-1}
libs="nccl dccl"
mps=()
if [ "$rpg" -gt 1 ]; then
  libs=dccl
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/nvd-mps CUDA_MPS_LOG_DIRECTORY=/tmp/nvd-mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d || { echo "nccl_vs_dccl: MPS did not start"; exit 1; }
  trap 'echo quit | nvidia-cuda-mps-control' EXIT
  mps=(-x CUDA_MPS_PIPE_DIRECTORY -x NCCL_TESTS_DEVICE=0)
fi
lib_dir() { [ "$1" = dccl ] && echo "$build" || echo "$nvidia_dir"; }

run() { # lib, gpus, log, the test's arguments
  local lib=$1 g=$2 log=$3
  shift 3
  timeout 600 mpirun --allow-run-as-root --oversubscribe --bind-to none -np $((g * rpg)) "${mps[@]}" \
    -x NCCL_NVLS_ENABLE=0 -x LD_LIBRARY_PATH="$(lib_dir "$lib"):${LD_LIBRARY_PATH:-}" "$@" > "$log" 2>&1
}

status=0
for g in $counts; do
  # What DCCL found on this machine: the links between GPUs and the rings (INFO at creation).
  NCCL_DEBUG=INFO DCCL_DEBUG=INFO DCCL_DEBUG_SUBSYS=INIT run dccl "$g" "$out/topology.g$g.log" \
    "$tests/all_reduce_perf" -b 8 -e 8 -n 1 -w 0 -c 0
  grep -E "ring|P2P|NVLink|PCI|peer|device" "$out/topology.g$g.log" | sed "s/^/[$g GPUs] /" >> "$out/topology.txt"
  for coll in $colls; do
    for lib in $libs; do
      log=$out/check.$coll.g$g.$lib.log
      run "$lib" "$g" "$log" "$tests/${coll}_perf" -b 8 -e 1M -f 4 -c 1 -n 2 -w 1
      if [ $? = 0 ] && grep -q "Out of bounds values : 0 OK" "$log"; then
        echo "check $coll, $g GPUs, $lib: ok"
      else
        echo "check $coll, $g GPUs, $lib: FAILED ($log)"
        tail -5 "$log"
        status=1
      fi
    done
    max=${NVD_MAX:-1G}
    [ "$coll" = all_reduce ] && max=${NVD_AR_MAX:-8G}
    for r in $(seq 1 "$rounds"); do
      order=$libs
      [ $((r % 2)) = 0 ] && order=$(echo "$libs" | tr ' ' '\n' | tac | tr '\n' ' ')
      for lib in $order; do
        log=$out/time.$coll.g$g.r$r.$lib.log
        run "$lib" "$g" "$log" "$tests/${coll}_perf" -b 8 -e "$max" -f 2 -c 0 -n "$iters" -w 5 ||
          { echo "time $coll, $g GPUs, round $r, $lib: FAILED ($log)"; tail -5 "$log"; status=1; }
      done
    done
  done
done
python3 "$here/nccl_vs_dccl_report.py" "$out" || status=1
exit $status
