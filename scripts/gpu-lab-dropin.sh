#!/usr/bin/env bash
# The drop-in part of the GPU machine's script (scripts/gpu-lab.sh dropin): unmodified NCCL programs on DCCL's
# libnccl.so.2 (issue 12, item 5). Parts, in DROPIN_PARTS order (default: all four):
#   onerank:   NVIDIA's nccl-tests all_reduce at one rank, NVIDIA's NCCL and DCCL alternating, 8 B-1 GiB (no MPS);
#   nccltests: every *_perf binary at DROPIN_RANKS ranks (default "2 4") on GPU 0 under MPS, over -b 8 -e 256M -f 4
#              -c 1, then each of DROPIN_VARIANTS (-d all -o all, -G 10, -m 4, -R 1, -R 2, -z 1, -y 1) over
#              -b 8 -e 16M -f 8 -c 1; every rank's /proc/PID/maps recorded (tests/dropin/maps_proof.sh) and checked
#              to hold DCCL's library and no other; zero wrong results;
#   selfperf:  DCCL's own perf tools at the same ranks and 128 MiB beside nccl-tests' busbw there (ratio, >= 0.9);
#   torch:     PyTorch on DCCL through LD_PRELOAD (tests/dropin/torch_ddp.py): collectives, barrier, send/recv and
#              DDP checked at 2 ranks; 200 DDP steps against the gloo backend (losses within 1e-4 relative, step
#              times); the same with TORCH_NCCL_USE_COMM_NONBLOCKING=1; 3 ranks with a new_group over ranks 0 and 2,
#              with and without device_id (ncclCommSplit).
# The nccl-tests binaries come from NCCL_TESTS_BIN (built against NVIDIA's nccl.h) and the library from
# DCCL_LIB_DIR (where libnccl.so.2 is; its perf/ folder holds DCCL's perf tools when it is a build folder).
# The whole takes more than one device call: DROPIN_PARTS, DROPIN_RANKS, DROPIN_BINARIES and DROPIN_VARIANTS
# narrow it. DROPIN_TIMEOUT: seconds per run (120).
# Usage: scripts/gpu-lab-dropin.sh DCCL_LIB_DIR NCCL_TESTS_BIN OUT_DIR
set -uo pipefail
lib=$(cd "$1" && pwd)
bin=$(cd "$2" && pwd)
out=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dropin=$here/../tests/dropin
mkdir -p "$out"
out=$(cd "$out" && pwd)
status=0
cuda_lib=/usr/local/cuda/lib64
nvidia=$(ldconfig -p | awk '/libnccl\.so\.2 / {print $NF; exit}')
dccl=$(readlink -f "$lib/libnccl.so.2")
echo "NVIDIA NCCL: $nvidia ($(strings "$nvidia" 2> /dev/null | grep -m1 -o 'NCCL version [0-9.a-z+]*'))"
echo "DCCL: $dccl"
binaries=${DROPIN_BINARIES:-$(cd "$bin" && ls ./*_perf | sed 's|^\./||; s|_perf$||' | tr '\n' ' ')}

run() { # name, then the command; prints the lines that carry figures or failures
  local name=$1
  shift
  timeout "${DROPIN_TIMEOUT:-120}" "$@" < /dev/null > "$out/$name.log" 2>&1
  local rc=$?
  grep -E "Out of bounds|Avg bus|^ok|^FAIL|checks passed|losses|step time" "$out/$name.log" | tr '\n' ' ' | cut -c1-300
  echo "-> $name exit $rc"
  [ "$rc" = 0 ] || { status=1; tail -6 "$out/$name.log"; }
  if grep "Out of bounds values" "$out/$name.log" | grep -vq ": 0 OK"; then
    echo "   FAIL: $name reported wrong values"
    status=1
  fi
}

# Every line of a maps record names DCCL's library: the proof that each rank ran on it.
check_maps() { # record, name
  if [ ! -s "$1" ] || grep -v ": $dccl\$" "$1" > /dev/null; then
    echo "   FAIL: $2: a rank mapped another libnccl (or none): $(sort -u -t: -k2 "$1" | head -3 | tr '\n' ' ')"
    status=1
  fi
}

onerank() {
  for round in 1 2; do
    for who in nvidia dccl; do
      local path=$cuda_lib
      [ $who = dccl ] && path=$lib:$cuda_lib
      rm -f "$out/maps.1rank.$who.$round"
      run "1rank.$who.$round" env NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH="$path" bash "$dropin/maps_proof.sh" \
        "$out/maps.1rank.$who.$round" "$bin/all_reduce_perf" -b 8 -e 1G -f 4 -c 1 -n 40 -w 5
      [ $who = dccl ] && check_maps "$out/maps.1rank.$who.$round" "1rank.$who.$round"
      awk -v w="$who" '$1 ~ /^[0-9]+$/ && ($1 == 8 || $1 == 131072 || $1 == 134217728 || $1 == 536870912) {
        print "  " w ": " $1 " B: " $6 " us, algbw " $7 " GB/s (out of place)"}' "$out/1rank.$who.$round.log"
    done
  done
}

mps_start() {
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/dccl-dropin-mps CUDA_MPS_LOG_DIRECTORY=/tmp/dccl-dropin-mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d || { echo "gpu-lab-dropin: MPS did not start"; exit 1; }
  trap 'echo quit | nvidia-cuda-mps-control' EXIT
}

# nccl-tests or DCCL's perf tools on DCCL's library, every rank on GPU 0 (then -np N and the command).
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x CUDA_MPS_PIPE_DIRECTORY -x NCCL_TESTS_DEVICE=0
     -x NCCL_NVLS_ENABLE=0 -x LD_LIBRARY_PATH="$lib:$cuda_lib")

nccltests() {
  local np t v name
  for np in ${DROPIN_RANKS:-2 4}; do
    for t in $binaries; do
      name=$t.np$np
      rm -f "$out/maps.$name"
      run "$name" "${mpi[@]}" -np "$np" bash "$dropin/maps_proof.sh" "$out/maps.$name" "$bin/${t}_perf" -b 8 -e 256M \
        -f 4 -c 1
      check_maps "$out/maps.$name" "$name"
      while IFS= read -r v; do
        [ -n "$v" ] || continue
        name=$t.np$np.$(tr -d ' -' <<< "$v")
        rm -f "$out/maps.$name"
        # shellcheck disable=SC2086 # a variant is several words
        run "$name" "${mpi[@]}" -np "$np" bash "$dropin/maps_proof.sh" "$out/maps.$name" "$bin/${t}_perf" -b 8 \
          -e 16M -f 8 -c 1 $v
        check_maps "$out/maps.$name" "$name"
      done <<< "${DROPIN_VARIANTS:-$'-d all -o all\n-G 10\n-m 4\n-R 1\n-R 2\n-z 1\n-y 1'}"
    done
  done
}

# busbw at 128 MiB (out of place; the largest size of -b 8 -e 256M -f 4) from a log of either tool.
busbw_128m() { awk '$1 == 134217728 {print $8; exit}' "$1"; }

selfperf() {
  local np t ours theirs
  [ -x "$lib/perf/all_reduce_perf" ] || { echo "gpu-lab-dropin: no DCCL perf tools in $lib/perf"; return; }
  for np in ${DROPIN_RANKS:-2 4}; do
    for t in all_reduce all_gather broadcast reduce reduce_scatter alltoall sendrecv; do
      [ -e "$out/$t.np$np.log" ] || continue
      run "self.$t.np$np" "${mpi[@]}" -np "$np" "$lib/perf/${t}_perf" -b 128M -e 128M -c 0 -n 20 -w 5
      ours=$(busbw_128m "$out/self.$t.np$np.log")
      theirs=$(busbw_128m "$out/$t.np$np.log")
      awk -v t="$t" -v n="$np" -v a="$theirs" -v b="$ours" 'BEGIN {
        r = b > 0 ? a / b : 0
        printf "  %s, %d ranks, 128 MiB busbw: nccl-tests %s GB/s, DCCL perf tools %s GB/s, ratio %.3f%s\n", t, n, a,
               b, r, (r >= 0.9 ? "" : "  FAIL (< 0.9)")
        exit (r >= 0.9 ? 0 : 1) }' || status=1
    done
  done
}

torch() {
  local ddp=$dropin/torch_ddp.sh
  run torch.np2 bash "$ddp" "$dccl" 2 --losses "$out/losses.nccl.json"
  run torch.np2.gloo bash "$ddp" none 2 --backend gloo --losses "$out/losses.gloo.json"
  python3 "$dropin/compare_losses.py" "$out/losses.gloo.json" "$out/losses.nccl.json" || status=1
  run torch.np2.nonblocking env TORCH_NCCL_USE_COMM_NONBLOCKING=1 bash "$ddp" "$dccl" 2 --losses \
    "$out/losses.nccl.nonblocking.json"
  python3 "$dropin/compare_losses.py" "$out/losses.gloo.json" "$out/losses.nccl.nonblocking.json" || status=1
  run torch.np3.subgroup bash "$ddp" "$dccl" 3 --subgroup
  run torch.np3.subgroup.device_id bash "$ddp" "$dccl" 3 --subgroup --device-id
}

for part in ${DROPIN_PARTS:-onerank nccltests selfperf torch}; do
  case $part in
    onerank) onerank ;;
    nccltests | selfperf | torch)
      [ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ] || mps_start
      $part
      ;;
    *) echo "gpu-lab-dropin: unknown part $part"; exit 2 ;;
  esac
done
exit $status
