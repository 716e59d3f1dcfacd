#!/usr/bin/env bash
# The drop-in part of the GPU machine's script (scripts/gpu-lab.sh dropin): unmodified NCCL programs on DCCL's
# libnccl.so.2. (1) NVIDIA's nccl-tests, one rank, NVIDIA's NCCL and DCCL alternating (no MPS: one process);
# (2) the same binaries on DCCL with 2 and 4 ranks on GPU 0 under MPS (NVIDIA's NCCL refuses two ranks on one GPU),
# every result checked (-c 1); (3) PyTorch DDP through LD_PRELOAD, 2 and 4 ranks (tests/dropin/torch_ddp.sh).
# The binaries come from NCCL_TESTS_BIN (nccl-tests built against NVIDIA's nccl.h, e.g. by
# tests/dropin/nccl_tests_bind.sh) and the library from DCCL_LIB_DIR (where libnccl.so.2 is).
# Usage: scripts/gpu-lab-dropin.sh DCCL_LIB_DIR NCCL_TESTS_BIN OUT_DIR   (DROPIN_TIMEOUT: seconds per run, 120)
set -uo pipefail
lib=$(cd "$1" && pwd)
bin=$(cd "$2" && pwd)
out=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$out"
status=0
nvidia=$(ldconfig -p | awk '/libnccl\.so\.2 / {print $NF; exit}')
echo "NVIDIA NCCL: $nvidia ($(strings "$nvidia" 2> /dev/null | grep -m1 -o 'NCCL version [0-9.a-z+]*'))"
echo "DCCL: $(LD_LIBRARY_PATH=$lib:/usr/local/cuda/lib64 ldd "$bin/all_reduce_perf" | grep libnccl)"
run() { # name, then the command; prints the lines that carry figures
  local name=$1
  shift
  timeout "${DROPIN_TIMEOUT:-120}" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  grep -E "Out of bounds|Avg bus|^ok|^FAIL|all checks passed|Error|error" "$out/$name.log" | head -12
  echo "-> $name exit $rc"
  [ "$rc" = 0 ] || { status=1; tail -8 "$out/$name.log"; }
}

# (1) One rank: the same binary with each library, alternating, twice.
for round in 1 2; do
  for who in nvidia dccl; do
    env=(NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=/usr/local/cuda/lib64)
    [ $who = dccl ] && env+=(LD_LIBRARY_PATH=$lib:/usr/local/cuda/lib64)
    run "1rank.$who.$round" env "${env[@]}" "$bin/all_reduce_perf" -b 8 -e 1G -f 4 -c 1 -n 40 -w 5
    awk -v w="$who" '$1 ~ /^[0-9]+$/ && ($1 == 8 || $1 == 1048576 || $1 == 268435456 || $1 == 1073741824) {
      print "  " w ": " $1 " B: " $6 " us, algbw " $7 " GB/s (out of place)"}' "$out/1rank.$who.$round.log"
  done
done

# (2) Several ranks on GPU 0, DCCL only, under an MPS daemon of its own.
export CUDA_MPS_PIPE_DIRECTORY=/tmp/dccl-dropin-mps CUDA_MPS_LOG_DIRECTORY=/tmp/dccl-dropin-mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d || { echo "gpu-lab-dropin: MPS did not start"; exit 1; }
trap 'echo quit | nvidia-cuda-mps-control' EXIT
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x CUDA_MPS_PIPE_DIRECTORY -x NCCL_TESTS_DEVICE=0
     -x NCCL_NVLS_ENABLE=0 -x LD_LIBRARY_PATH="$lib:/usr/local/cuda/lib64")
for np in 2 4; do
  run "allreduce.np$np" "${mpi[@]}" -np $np "$bin/all_reduce_perf" -b 8 -e 256M -f 4 -c 1 -n 10 -w 2
  for t in all_gather sendrecv broadcast reduce_scatter alltoall; do
    [ -x "$bin/${t}_perf" ] || continue
    run "$t.np$np" "${mpi[@]}" -np $np "$bin/${t}_perf" -b 8 -e 16M -f 8 -c 1 -n 5 -w 1
  done
done

# (3) PyTorch DDP through LD_PRELOAD (under the MPS daemon above).
for np in 2 4; do run "torch_ddp.np$np" bash "$here/../tests/dropin/torch_ddp.sh" "$lib/libnccl.so.2" $np; done
exit $status
