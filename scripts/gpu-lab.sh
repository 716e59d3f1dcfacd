#!/usr/bin/env bash
# The GPU machine's one call: builds DCCL with the CUDA toolkit and runs everything that needs a GPU, writing the
# logs to $OUT (the device tool brings them back) or ./gpu-lab-out. Today that is the shared device code, the
# host-buffer library's behaviour next to a GPU, and the connection FIFOs between kernels and host threads and
# between two kernels in two processes (under MPS, which this script starts and stops); GPU collectives and their
# benchmarks join here as they land.
# Usage: bash scripts/gpu-lab.sh [build dir=build-gpu]
#        bash scripts/gpu-lab.sh measure [build dir]: the measurements of docs/gpu.md (scripts/gpu-lab-measure.sh)
set -uo pipefail
if [ "${1:-}" = measure ]; then
  shift
  exec bash "$(dirname "${BASH_SOURCE[0]}")/gpu-lab-measure.sh" "$@"
fi
build=${1:-build-gpu}
out=${OUT:-gpu-lab-out}
mkdir -p "$out"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nvcc --version | tail -2
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"

if ! { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
       ninja -C "$build" device_shared_test cuda_host_paths conn_host_test conn_ipc_test gpu_colls gpu_graphs \
         all_reduce_perf broadcast_perf reduce_perf all_gather_perf reduce_scatter_perf sendrecv_perf alltoall_perf \
         gather_perf scatter_perf; } > "$out/build.log" 2>&1; then
  tail -40 "$out/build.log"
  echo "gpu-lab: build failed"
  exit 1
fi

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
for t in device_shared_test cuda_host_paths conn_host_test gpu_graphs; do run_test $t "$build/tests/$t"; done

# Kernels of two processes run at once only under MPS; a daemon of our own, with its own pipe directory.
mps=$(command -v nvidia-cuda-mps-control || echo /usr/local/nvidia/bin/nvidia-cuda-mps-control)
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if "$mps" -d; then
  run_test conn_ipc_test "$build/tests/conn_ipc_test"
  echo quit | "$mps"
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY # the tests below run without it
else
  echo "gpu-lab: cannot start MPS ($mps)"
  status=1
fi

# Device-buffer collectives: ranks of one process on GPU 0, every algorithm.
for n in 1 2 3 4; do
  for algo in "" ring tree oneshot; do
    [ "$n" = 1 ] && [ -n "$algo" ] && continue
    log="$out/gpu_colls.np$n${algo:+.$algo}.log"
    DCCL_ALGO=$algo timeout 300 "$build/tests/gpu_colls" "$n" > "$log" 2>&1
    rc=$?
    grep -E "^FAIL" "$log" | head -5
    tail -1 "$log"
    [ "$rc" = 0 ] || { status=1; echo "gpu-lab: gpu_colls $n ranks ${algo:-auto} exit $rc"; }
  done
done
# The perf tools on device buffers, ranks in processes of their own under MPS (a daemon of their own).
bash "$(dirname "${BASH_SOURCE[0]}")/gpu-lab-perf.sh" "$build" "$out" || status=1
echo "gpu-lab: $([ $status = 0 ] && echo 'all passed' || echo FAILED)"
exit $status
