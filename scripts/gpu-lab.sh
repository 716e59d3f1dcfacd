#!/usr/bin/env bash
# The GPU machine's script: builds DCCL with the CUDA toolkit and runs everything that needs a GPU, writing the
# logs to $OUT (the device tool brings them back) or ./gpu-lab-out. Each part fits one device call (10 minutes);
# the build is kept in the build folder, so a later part reuses it.
#   tests: the shared device code, the host library beside a GPU, the connection FIFOs (kernel <-> host thread,
#          kernel <-> kernel across processes under MPS), graphs, and every device collective with 1-4 ranks of one
#          process and every algorithm, with ncclMemAlloc buffers, and under a small memory limit (about 5 min)
#   perf:  the perf tools on device buffers under MPS (every tool checked at 2-3 ranks; all-reduce timed 8 B-1 GiB
#          at 1, 2, 4 ranks), the 8-byte latency beside an empty kernel and under graph replay, and the 256 MiB
#          all-reduce over fence scopes, slot sizes and channel counts (about 5 min)
#   gloo:  DCCL against PyTorch gloo with CUDA tensors, 2 and 4 ranks (perf/gloo_vs_dccl.sh, about 3 min)
#   nccl:  NVIDIA's NCCL against DCCL's libnccl.so.2 under nccl-tests (perf/nccl_vs_dccl.sh, issue 13): every GPU
#          count the machine has, one rank per GPU; on a one-GPU machine also DCCL alone with 2 ranks on it
#          (NVD_* narrow it to fit a call)
#   all:   tests, perf and gloo, one after the other (the default; more than one device call's time)
#   measure: the measurements of docs/gpu.md (scripts/gpu-lab-measure.sh)
# Usage: bash scripts/gpu-lab.sh [tests|perf|gloo|nccl|all|measure] [build dir=build-gpu]
set -uo pipefail
part=${1:-all}
[ $# -gt 0 ] && shift
here=$(dirname "${BASH_SOURCE[0]}")
[ "$part" = measure ] && exec bash "$here/gpu-lab-measure.sh" "$@"
build=${1:-build-gpu}
out=${OUT:-gpu-lab-out}
mkdir -p "$out"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nvcc --version | tail -2
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"

start=$(date +%s)
if ! { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
       ninja -C "$build" device_shared_test cuda_host_paths conn_host_test conn_ipc_test gpu_colls gpu_graphs \
         all_reduce_perf broadcast_perf reduce_perf all_gather_perf reduce_scatter_perf sendrecv_perf alltoall_perf \
         gather_perf scatter_perf dev_latency nccl_dropin; } > "$out/build.log" 2>&1; then
  tail -40 "$out/build.log"
  echo "gpu-lab: build failed"
  exit 1
fi
echo "gpu-lab: built in $(($(date +%s) - start)) s"

status=0
run_test() { # name, then the command's words
  local t=$1
  shift
  timeout 240 "$@" > "$out/$t.log" 2>&1
  local rc=$?
  tail -15 "$out/$t.log"
  echo "gpu-lab: $t exit $rc"
  [ "$rc" = 0 ] || status=1
}

tests() {
  for t in device_shared_test cuda_host_paths conn_host_test gpu_graphs; do run_test $t "$build/tests/$t"; done
  # Kernels of two processes run at once only under MPS; a daemon of our own, with its own pipe directory.
  local mps
  mps=$(command -v nvidia-cuda-mps-control || echo /usr/local/nvidia/bin/nvidia-cuda-mps-control)
  if CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog "$mps" -d; then
    CUDA_MPS_PIPE_DIRECTORY=/tmp/mps run_test conn_ipc_test "$build/tests/conn_ipc_test"
    echo quit | CUDA_MPS_PIPE_DIRECTORY=/tmp/mps "$mps"
  else
    echo "gpu-lab: cannot start MPS ($mps)"
    status=1
  fi
  # Device-buffer collectives: ranks of one process on GPU 0, every algorithm; then ncclMemAlloc buffers, and a
  # memory limit that lowers the channels.
  local n algo log rc
  for n in 1 2 3 4 4m 4l; do
    for algo in "" ring tree oneshot; do
      case $n in 1 | 4m | 4l) [ -n "$algo" ] && continue ;; esac
      log="$out/gpu_colls.np$n${algo:+.$algo}.log"
      case $n in
        4m) DCCL_ALGO=$algo timeout 300 "$build/tests/gpu_colls" 4 memalloc > "$log" 2>&1 ;;
        4l) DCCL_DEV_MEM_LIMIT=8388608 DCCL_DEBUG=INFO DCCL_DEBUG_SUBSYS=INIT timeout 300 "$build/tests/gpu_colls" 4 \
              > "$log" 2>&1 ;;
        *) DCCL_ALGO=$algo timeout 300 "$build/tests/gpu_colls" "$n" > "$log" 2>&1 ;;
      esac
      rc=$?
      grep -E "^FAIL|device channels" "$log" | head -5
      tail -1 "$log"
      [ "$rc" = 0 ] || { status=1; echo "gpu-lab: gpu_colls $n ranks ${algo:-auto} exit $rc"; }
    done
  done
}

case $part in
  tests) tests ;;
  perf) bash "$here/gpu-lab-perf.sh" "$build" "$out" || status=1 ;;
  gloo) bash perf/gloo_vs_dccl.sh "$build" "$out" 3 "2 4" | tee "$out/gloo_vs_dccl.md" || status=1 ;;
  nccl)
    bash perf/nccl_vs_dccl.sh "$build" "$out/nccl" || status=1
    if [ "$(nvidia-smi -L | grep -c '^GPU')" = 1 ]; then
      NVD_RANKS_PER_GPU=2 bash perf/nccl_vs_dccl.sh "$build" "$out/nccl-2ranks" || status=1
    fi
    ;;
  all)
    tests
    bash "$here/gpu-lab-perf.sh" "$build" "$out" || status=1
    bash perf/gloo_vs_dccl.sh "$build" "$out" 3 "2 4" | tee "$out/gloo_vs_dccl.md" || status=1
    ;;
  *) echo "usage: gpu-lab.sh [tests|perf|gloo|nccl|all|measure] [build dir]"; exit 2 ;;
esac
echo "gpu-lab: $part $([ $status = 0 ] && echo 'all passed' || echo FAILED) in $(($(date +%s) - start)) s"
exit $status
