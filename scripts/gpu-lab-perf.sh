#!/usr/bin/env bash
# The perf part of the GPU machine's script (scripts/gpu-lab.sh perf): ranks in processes of their own under
# mpirun, every rank on GPU 0 under MPS (ranks in separate processes run their kernels concurrently only under MPS;
# docs/gpu.md). First every tool checks every type, op and root at small sizes (2 and 3 ranks); then all_reduce
# float32 sum from 8 B to 1 GiB is timed (and checked) with 1, 2 and 4 ranks; then the 8-byte all-reduce beside an
# empty kernel (dev_latency); then the 256 MiB all-reduce at 2 ranks over the device knobs.
# Usage: scripts/gpu-lab-perf.sh BUILD_DIR OUT_DIR
# GPU_LAB_TOOLS (default: all nine) limits the checked tools, GPU_LAB_FENCES (default: auto system) the fence
# scopes timed, GPU_LAB_KNOBS (default: "262144:16 262144:32 1048576:16 1048576:32", chunk:channels) the 256 MiB
# configurations, to fit a shorter device call.
set -uo pipefail
build=$1
out=$2
export CUDA_MPS_PIPE_DIRECTORY=/tmp/dccl-mps CUDA_MPS_LOG_DIRECTORY=/tmp/dccl-mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d || { echo "gpu-lab-perf: MPS did not start"; exit 1; }
trap 'echo quit | nvidia-cuda-mps-control' EXIT
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x CUDA_MPS_PIPE_DIRECTORY -x DCCL_ALGO
     -x DCCL_DEV_FENCE -x DCCL_DEV_CHUNK_SIZE -x DCCL_DEV_NCHANNELS)
status=0
run() { # name, then the command
  local name=$1
  shift
  timeout 300 "$@" > "$out/$name.log" 2>&1
  local rc=$?
  grep -E "Out of bounds|Avg bus" "$out/$name.log" | tr '\n' ' '
  echo "-> $name exit $rc"
  [ "$rc" = 0 ] || { status=1; tail -5 "$out/$name.log"; }
}
for tool in ${GPU_LAB_TOOLS:-all_reduce broadcast reduce all_gather reduce_scatter sendrecv alltoall gather scatter}; do
  for np in 2 3; do
    run "check.$tool.np$np" "${mpi[@]}" -np "$np" "$build/perf/${tool}_perf" -b 0 -e 1M -f 64 -c 1 -d all -o all \
      -r all -n 1 -w 0 -T 240
  done
done
for np in 1 2 4; do
  run "allreduce.np$np" "${mpi[@]}" -np "$np" "$build/perf/all_reduce_perf" -b 8 -e 1G -f 4 -c 1 -n 20 -w 5 \
    -J "$out/allreduce.np$np.json" -T 280
done
# 8 bytes: back to back, synchronised after each, under graph replay, beside an empty kernel; both fence scopes.
fences=${GPU_LAB_FENCES:-auto system}
for fence in $fences; do
  DCCL_DEV_FENCE=$fence run "latency.np2.$fence" "${mpi[@]}" -np 2 "$build/perf/dev_latency" -n 2000 -r 7
  grep -E "^ |^#" "$out/latency.np2.$fence.log"
done
run latency.np4 "${mpi[@]}" -np 4 "$build/perf/dev_latency" -n 2000 -r 5
grep -E "^ |^#" "$out/latency.np4.log"
# 256 MiB at 2 ranks over the knobs (alternated twice): which scope, slot size and channel count reach HBM best.
for round in 1 2; do
  for fence in $fences; do
    for knob in ${GPU_LAB_KNOBS:-262144:16 262144:32 1048576:16 1048576:32}; do
      chunk=${knob%:*} nch=${knob#*:}
      name="knobs.$fence.$chunk.$nch.r$round"
      DCCL_DEV_FENCE=$fence DCCL_DEV_CHUNK_SIZE=$chunk DCCL_DEV_NCHANNELS=$nch timeout 120 "${mpi[@]}" -np 2 \
        "$build/perf/all_reduce_perf" -b 256M -e 256M -c 1 -n 20 -w 3 > "$out/$name.log" 2>&1 || status=1
      echo "$name $(grep -E '^ +268435456' "$out/$name.log" | awk '{print "time_us", $6, "busbw", $8}')"
    done
  done
done
exit $status
