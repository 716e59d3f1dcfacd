#!/usr/bin/env bash
# `bash scripts/gpu-lab.sh measure [build dir=build-gpu-measure]`: the measurements the device design rests on
# (docs/gpu.md), on the GPU machine in one call: CUDA IPC of both kinds between processes, kernel and copy-engine
# round trips, and what MPS clients see when one faults or is killed, each without MPS and under MPS. Builds only
# the two programs in perf/gpu, starts and stops MPS itself (a fault can leave MPS refusing clients: it restarts
# it), and writes measure.log, measure-build.log, machine.txt and mps-logs.txt to $OUT (or ./gpu-lab-out).
set -uo pipefail
build=${1:-build-gpu-measure}
out=${OUT:-gpu-lab-out}
mkdir -p "$out"
log="$out/measure.log"
mps_control=$(command -v nvidia-cuda-mps-control || echo /usr/local/nvidia/bin/nvidia-cuda-mps-control)
mps_pipe=/tmp/mps
mps_logdir=/tmp/mpslog
step_timeout=150

say() { echo "$*" | tee -a "$log"; }

{
  date -u +%Y-%m-%dT%H:%MZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_mode --format=csv,noheader
  nvcc --version | tail -2
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt" | tee "$log"

if ! { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDCCL_BUILD_PERF=ON \
         -DDCCL_BUILD_TESTS=OFF && ninja -C "$build" gpu_ipc_pair gpu_mps_fault; } > "$out/measure-build.log" 2>&1; then
  tail -40 "$out/measure-build.log"
  echo "gpu-lab measure: build failed"
  exit 1
fi
bin="$build/perf/gpu"

# Runs one measurement with a time limit (timeout signals the whole process group: the clients too).
measure() {
  local start=$SECONDS
  say "\$ $*"
  timeout -k 5 "$step_timeout" "$@" 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  say "gpu-lab measure: exit $rc after $((SECONDS - start)) s"
}

mps_start() {
  mkdir -p "$mps_pipe" "$mps_logdir"
  CUDA_MPS_PIPE_DIRECTORY=$mps_pipe CUDA_MPS_LOG_DIRECTORY=$mps_logdir "$mps_control" -d
  say "gpu-lab measure: MPS control daemon started (status $?)"
}

# quit, then whatever is left of the daemon and its servers is killed by pid (a faulted server may not go).
mps_stop() {
  local servers pid
  servers=$(echo get_server_list | CUDA_MPS_PIPE_DIRECTORY=$mps_pipe timeout 10 "$mps_control" 2>/dev/null)
  pid=$(cat "$mps_pipe/nvidia-cuda-mps-control.pid" 2>/dev/null)
  echo quit | CUDA_MPS_PIPE_DIRECTORY=$mps_pipe timeout 15 "$mps_control"
  for _ in $(seq 100); do
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  for p in $pid $servers; do
    if kill -0 "$p" 2>/dev/null; then
      say "gpu-lab measure: MPS process $p still there after quit: killed"
      kill -9 "$p"
    fi
  done
  say "gpu-lab measure: MPS stopped (servers: ${servers:-none})"
}

measure_all() {
  local mode=$1
  measure "$bin/gpu_ipc_pair" --local --label "$mode"
  measure "$bin/gpu_ipc_pair" --kind legacy --label "$mode"
  measure "$bin/gpu_ipc_pair" --kind fd --label "$mode"
}

scenarios="fault kill kill-own kill-idle"
say "== without MPS"
measure_all "no MPS"
for s in $scenarios; do measure "$bin/gpu_mps_fault" "$s" --label "no MPS"; done

say "== under MPS"
export CUDA_MPS_PIPE_DIRECTORY=$mps_pipe
mps_start
measure_all "MPS"
# A fresh MPS for each scenario: one client's death can take the others with it.
for s in $scenarios; do
  measure "$bin/gpu_mps_fault" "$s" --label "MPS"
  say "gpu-lab measure: MPS servers after '$s': $(echo get_server_list | timeout 10 "$mps_control" 2>&1 | tr '\n' ' ')"
  mps_stop
  [ "$s" = "${scenarios##* }" ] || mps_start
done
unset CUDA_MPS_PIPE_DIRECTORY

for f in "$mps_logdir"/*; do
  [ -f "$f" ] && { echo "==> $f"; cat "$f"; }
done > "$out/mps-logs.txt" 2>&1
fails=$(grep -c '^FAILED' "$log")
echo "gpu-lab measure: done in $SECONDS s, $fails FAILED line(s); logs in $out"
