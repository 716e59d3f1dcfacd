#!/usr/bin/env bash
# The paths part of the GPU machine's script (scripts/gpu-lab.sh paths, issue 11): both ends of the comparison on
# one GPU, alternated over ROUNDS rounds (default 2) so drift hits every configuration alike.
#   direct: ranks of one process (perf/inproc_allreduce, 2 and 4 ranks, float32 sum 8 B-1 GiB): the direct
#           all-reduce (each rank reads its slice of every input in place) against the ring and the default;
#   staged: ranks in processes of their own under MPS (all_reduce_perf, 2 and 4 ranks, 8 B-1 GiB): the FIFOs in GPU
#           memory (p2p) against the FIFOs in pinned shared host memory (DCCL_TRANSPORT=shm, two PCIe crossings),
#           and the buffers in windows (-R 2: the direct all-reduce reading the other processes' buffers in place).
#   others: all-gather, reduce-scatter, broadcast and reduce (PATHS_OTHERS_COLLS: all_reduce too, or fewer),
#           PATHS_OTHERS_BEGIN (default 4K) to 256 MiB, 4 ranks in processes under MPS, alternated: the ring over
#           the p2p FIFOs (DCCL_ALGO=ring), the default on unregistered buffers (mapped on first use, the cost model
#           choosing) and the direct algorithms on buffers in windows (-R 2, DCCL_ALGO=direct): issue 11's 40% bars
#           and where direct starts to win.
#   net:    issue 15: 4 ranks in processes under MPS as two pretend hosts of 2 (DCCL_HOSTID=A,A,B,B: device links
#           over sockets between them) against one host (p2p only), all-reduce float32 8 B-256 MiB, with the
#           loopback TCP rate (plain TCP and the socket transport's own links, tests/unit/test_transport_socket)
#           measured first as the socket path's ceiling; then the 8-byte latency (dev_latency, 2 ranks) of two
#           pretend hosts and one, eager and under graph replay.
#   ce:     issue 10's copy-engine path: 2 and 4 ranks (CE_RANKS) in processes of their own WITHOUT MPS
#           (the perf tools of CE_COLLS, default all_reduce, through mpirun, float32 sum 8 B-64 MiB; sendrecv and
#           alltoall take DCCL_CE_P2P=1 with it), DCCL_CE=1
#           against the kernels, alternated; then 2 ranks under MPS, the same pairs (where the kernels are expected
#           to win).
#   lazy:   issue 11's buffers mapped on first use: 2 and 4 ranks in processes under MPS (all_reduce_perf on its
#           unregistered cudaMalloc buffers, float32 sum 8 B-1 GiB): DCCL_LAZY_MAP_BYTES=0 (every call meets, then
#           the direct all-reduce) against -1 (never: the p2p ring), alternated: where mapping starts to pay.
#           PATHS_LAZY_NP ("2 4") and PATHS_LAZY_BEGIN (8: the first size) narrow it.
#   ctas:   the 4-rank direct all-reduce's middle sizes against the CTAs a rank's launch takes: 4 ranks in
#           processes under MPS, the default all-reduce 1-256 MiB (unregistered buffers, checked, 200 operations),
#           DCCL_MAX_CTAS over PATHS_CTAS_LIST ("default 28 24 16"), alternated over ROUNDS: does leaving SMs free
#           for the ranks' next launches shorten the period (4 x 32 CTAs take 128 of an H100's 132 SMs)?
#   alloc:  the 4-rank all-reduce between processes on each kind of buffer (4 ranks under MPS, PATHS_ALLOC_BEGIN
#           (256M)-1 GiB): cudaMalloc buffers in whole 2 MiB pages (legacy IPC mappings; the perf tools' default, as
#           PyTorch's caching allocator makes them) against ncclMemAlloc buffers (cuMem, mapped from file
#           descriptors, --memalloc) and, with PATHS_ALLOC_KINDS (default "cudamalloc memalloc"), buffers across
#           the 20 MiB parts of an expandable segment ("segments": --segments, spans) and cudaMalloc allocations of
#           exactly the buffer and its guards ("exact": --exact; out of place about half the floor, where whole
#           pages reach 94%, 2026-12-07), alternated, for buffers in windows (-R 2) and
#           unregistered ones mapped on first use (PATHS_ALLOC_REG: "windows lazy"), each under the settings of
#           PATHS_ALLOC_SETS
#           ("default", or comma-separated VAR=VALUE lists such as DCCL_MAX_CTAS=8, fewer CTAs touching fewer
#           pages at once, or LD_LIBRARY_PATH=DIR, DIR's library against this build's; PATHS_ALLOC_CTAS="default 8"
#           still means the caps);
#           stall reports after 5 s (2026-12-04, exact sizes: cudaMalloc out of place 44-48% of the floor;
#           ncclMemAlloc 85-91%). The floor's rate is measured first on the machine at hand
#           (perf/gpu/hbm_ceiling), and each line gives both times as % of it.
#   reach:  what alloc's cudaMalloc loss follows (perf/gpu/ipc_reach, no kernels but one process's): one kernel
#           copying k = 1-3 regions into k others, local or another process's, legacy IPC against cuMem fd
#           mappings, at PATHS_REACH_MIB ("64 256 1024") MiB a region: does the rate fall with the number of the
#           other process's allocations reached, and with their size? (No: 0.99-1.03 of local, 2026-12-07.)
#   mesh:   the direct all-reduce's memory pattern without DCCL (perf/gpu/ipc_mesh, under MPS): PATHS_MESH_RANKS (4)
#           processes, each kernel summing its slice of every input into every output, all at once, out of place
#           and in place and in two kernels (fewer allocations reached by each), legacy IPC against cuMem fd
#           mappings (PATHS_MESH_KINDS, "legacy fd"; "cudamalloc": legacy IPC of the runtime's cudaMalloc memory),
#           PATHS_MESH_MIB ("256 1024") MiB each, PATHS_MESH_GUARD ("0"; "0 256": also with the perf tools' guard
#           bytes either side, so no allocation is whole 2 MiB pages), over ROUNDS: does alloc's out-of-place
#           cudaMalloc loss come without DCCL too, and do two kernels avoid it? (2026-12-07: on whole pages no loss;
#           with the guards out of place 63%, in place 100%; a mode lays the work out in DCCL's old pieces.)
#   latency: issue 10's and 11's 8-byte bars in one process WITHOUT MPS (perf/inproc_allreduce, 8 B, 2000 each):
#           1 rank (beside NVIDIA NCCL's 1-rank 6.0 us), then 2 and 4 ranks (LATENCY_NP, "2 4") by the default and
#           DCCL_ALGO=oneshot (LATENCY_ALGOS), each with the ranks' launches shared and apart (DCCL_DEV_SHARED_LAUNCH
#           1 and 0), alternated: back to back, synchronised after each, replayed as one CUDA graph and
#           synchronised, and the empty kernel on every rank's stream + synchronise of the same run.
#   small:  where the direct all-reduce starts to beat the one-shot through the FIFOs in one process WITHOUT MPS
#           (perf/inproc_allreduce, SMALL_NP ranks, default "2 4", float32 sum 8 B-64 KiB by 2x, 1000 each):
#           SMALL_ALGOS (default "direct oneshot") alternated, back to back, synchronised after each and replayed as
#           a CUDA graph: the size DCCL_DIRECT_MIN_BYTES should name.
#   cta:    what one CTA moves in the direct all-reduce's pattern at 4 ranks (perf/gpu/cta_rate, one process, no
#           MPS): DCCL's loop, a plain one, loads alone and stores alone, on 1, 8, 32, 128 and every SM's CTAs, at
#           PATHS_CTA_KIB ("32 1024") KiB of each buffer a CTA: what sets the ~50 GB/s a CTA of the direct path below
#           16 MiB (2026-12-07)?
#   ceiling: the staged path's own ceiling, measured (perf/gpu/pcie_ceiling, no MPS): device to pinned host and
#           back by copy engines and by kernels, one way and both ways at once.
#   stagedknobs: issue 11's staged bar (>= 70% of PCIe at 256 MiB; 64-69% so far): 2 ranks in processes under MPS,
#           DCCL_TRANSPORT=shm, all-reduce float32 256 MiB over slot sizes, slots and CTAs: PATHS_STAGED_KNOBS lists
#           CHUNK_BYTES/NSLOTS/MAX_CTAS (MAX_CTAS empty: the default), default "262144/4/ 1048576/4/ 4194304/4/
#           1048576/8/ 262144/4/8 1048576/4/32".
#   check:  issue 14's cost on the GPU: the 8-byte all-reduce of 2 ranks in processes under MPS (dev_latency) with
#           the checks (defaults) against without (DCCL_CHECK=0: no fingerprint compare in the kernels,
#           DCCL_STALL_REPORT_MS=0: no launch notes for the monitor), alternated over ROUNDS (3 or more).
#   proto:  issue 10's LL past the one-shot: 2 and 4 ranks in processes under MPS (PROTO_NP, "2 4"), the ring
#           all-reduce (DCCL_ALGO=ring), all-gather and send/recv 8 B-1 MiB, DCCL_PROTO=bulk against the default (LL
#           where every step fits 4 KiB) against ll (4 KiB LL steps at every size), alternated: where LL stops paying.
#   det:    issue 11's deterministic mode on the kernels' FIFO paths: DET_NP ranks (default 2; "2 4": both) in
#           processes under MPS with nothing mapped on first use (DCCL_LAZY_MAP_BYTES=-1: no direct collectives),
#           all-reduce, reduce-scatter and reduce 8 B-256 MiB, DCCL_DETERMINISTIC=1 (one-shot and ordered schedules)
#           against 0 (ring, one-shot), alternated: what the same bits everywhere cost there.
#   trace:  where the 8-byte all-reduce's time goes (issue 10's 15 us and issue 11's 10 us with a synchronise):
#           perf/gpu/kernel_trace (CUPTI, injected by CUDA_INJECTION64_PATH) records every kernel and launch call of
#           dev_latency (2 ranks in processes under MPS: ar+sync, then empty+sync and fat+sync (an empty kernel with
#           a parameter the size of DCCL's launch), 2000 each) and of
#           inproc_allreduce (2 ranks of one process, 8 B, with a synchronise after each: the default, direct, and
#           DCCL_ALGO=oneshot, LL through the FIFOs with no second meeting); then
#           perf/kernel_trace_report.py prints the medians: the launch call, the queue, the kernel, the ranks' start
#           skew, the time after both started, the synchronise's wake-up and the host's gap. PATHS_TRACE_CASES
#           picks the runs (default "ar+sync empty+sync fat+sync inproc inproc-oneshot"); np4:SIZE traces 4 ranks'
#           all_reduce_perf at SIZE back to back (processes under MPS, 2000 operations): host- or GPU-bound.
#   stages: what the trace cannot split (the kernel's own 16-18 us of an 8-byte all-reduce through the FIFOs, on an H100
#           2026-12-05): a library built with DCCL_DEV_STAGES=ON (collectives/device/dev_stages.cuh: thread 0 of CTA 0
#           stamps %globaltimer at each stage its launch passes, in order, and every 1024th launch prints the mean time
#           of each since the one before; every CTA stamps its start and end, and the launch's spread is printed too:
#           how far apart its CTAs started and ended), PATHS_STAGES_LIB (packed by scripts/gpu-carry.sh with
#           GPU_CARRY_STAGES) or else built here as BUILD_DIR-stages (about 2 minutes of the call), runs the cases
#           PATHS_STAGES_CASES names (default "ar+sync inproc inproc-oneshot", the trace's): dev_latency ar+sync (2
#           ranks under MPS), inproc_allreduce 8 B (2 ranks of one process: the default, and DCCL_ALGO=oneshot), and
#           np4:SIZE, the default all-reduce of 4 ranks in processes under MPS at SIZE (all_reduce_perf, 2048
#           operations, unregistered buffers: the direct kernel's meeting, reduction and barrier at middle sizes).
#   ab:     a kernel change against the code before it, on one GPU in one call: the 8-byte all-reduce of 2 ranks in
#           processes under MPS (dev_latency: ar+sync, ar b2b, empty+sync) and of 2 ranks of one process
#           (inproc_allreduce 8 B: the default, direct, and DCCL_ALGO=oneshot, the FIFOs' LL step), and the bulk
#           steps of the generic kernel (all_reduce_perf DCCL_ALGO=ring and tree 8 B-128 MiB, 2 processes under MPS,
#           8 B, 32 KiB and 128 MiB reported; the direct path at 128 MiB in one process): a change to the steps'
#           bookkeeping must not cost the bulk loops. Each library of PATHS_AB_BASE (space-separated: folders, or
#           base-lib.tar.gz files as scripts/gpu-carry.sh packs them with GPU_CARRY_BASE) and this build's run in
#           turn, over ROUNDS (3 or more: the machine swings); each is named by the code it was built from. The perf
#           tools are this build's; LD_LIBRARY_PATH puts the other library before their RUNPATH. PATHS_AB_CASES
#           picks the cases (default "mps ring tree inproc bulk"; np4: 4 ranks in processes under MPS, the
#           default all-reduce 1-64 MiB, checked, 500 operations: the direct path's middle sizes; np4coll: the
#           same for all-gather, reduce-scatter and broadcast, 64 KiB-16 MiB, 200 operations; np2: 2 ranks'
#           default all-reduce 256 KiB-4 MiB, 500 operations; floor4: 4 ranks' 1 MiB all-reduce back to back
#           beside the least its launches cost (dev_latency -b 1M: empty b2b, meet b2b, and wide meet b2b, kernels
#           in DCCL's shape of 32 CTAs whose every CTA meets every rank's twice): how much of the middle sizes'
#           period is DCCL's own).
#   knob:   a setting against another on the 8-byte all-reduce, alternated over ROUNDS: PATHS_KNOB lists
#           VAR=VALUE settings (one variable each, e.g. "DCCL_DEV_NSLOTS=4 DCCL_DEV_NSLOTS=8", or
#           "LD_LIBRARY_PATH=/tmp/base LD_LIBRARY_PATH=" for a library against this build's; none: the part is
#           skipped), each
#           running dev_latency (2 ranks in processes under MPS: every mode, the empty kernel in DCCL's launch shape
#           among them) and inproc_allreduce (2 ranks of one process under MPS: the default and
#           DCCL_ALGO=oneshot), at PATHS_KNOB_BYTES (8: the tiny path; 1024 takes the LL one-shot).
#           perf/knob_report.py tabulates the medians.
# Every run checks its results and writes its JSON. Prints one line per size and configuration; the logs go to
# OUT_DIR. PATHS_PARTS (default "direct staged others") picks the parts, PATHS_STAGED (default "p2p windows shm")
# the staged part's configurations.
# Usage: scripts/gpu-lab-paths.sh BUILD_DIR OUT_DIR
set -uo pipefail
build=$1
out=$2
mkdir -p "$out"
status=0
rounds=${ROUNDS:-2}
parts=${PATHS_PARTS:-direct staged others}
# The device call's time: GPU_LAB_DEADLINE (epoch seconds, set by gpu-lab.sh) skips a run that would not end before
# it, so the logs gathered so far still come back (a run cut by the call's limit loses them all).
deadline=${GPU_LAB_DEADLINE:-0}
fits() { # fits SECONDS NAME
  local left=$((deadline - $(date +%s)))
  [ "$deadline" = 0 ] || [ "$left" -ge "$1" ] && return 0
  echo "skipped $2: $left s left of the call"
  return 1
}

[[ " $parts " == *" direct "* ]] && for round in $(seq "$rounds"); do
  for np in 2 4; do
    for algo in direct ring default; do
      name=direct.np$np.$algo.r$round
      fits 90 "$name" || continue
      env DCCL_ALGO="$([ $algo = default ] || echo $algo)" timeout 240 "$build/perf/inproc_allreduce" "$np" 8 1G 20 8 \
        > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; tail -3 "$out/$name.log"; }
      awk -v n="$name" '$1 ~ /^[0-9]+$/ && ($1 == 8 || $1 == 262144 || $1 == 16777216 || $1 == 134217728 ||
        $1 == 1073741824) {printf "%s %s B: %s us, busbw %s, 2NS/t %s GB/s, synchronised after each %s us\n", n, $1,
        $2, $4, $5, $6}' "$out/$name.log"
    done
  done
done

[[ " $parts " == *" latency "* ]] && for round in $(seq "$rounds"); do
  for case in 1.default.shared $(for np in ${LATENCY_NP:-2 4}; do
      for algo in ${LATENCY_ALGOS:-default oneshot}; do echo $np.$algo.shared $np.$algo.apart; done; done); do
    IFS=. read -r np algo launch <<< "$case"
    name=latency.np$case.r$round
    fits 20 "$name" || continue
    DCCL_TRANSPORT= DCCL_ALGO=$([ "$algo" = default ] || echo "$algo") \
      DCCL_DEV_SHARED_LAUNCH=$([ "$launch" = shared ] && echo 1 || echo 0) timeout 30 \
      "$build/perf/inproc_allreduce" "$np" 8 8 2000 > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; }
    awk -v n="$name" '/^# empty kernel/ {e = $(NF-1)} /^# one empty kernel/ {j = $(NF-1)} /^# graph\+sync/ {g = $(NF-1)}
      $1 == 8 {b = $2; s = $6} END {printf "%s 8 B: empty+sync %s, joined+sync %s, back to back %s, synchronised %s, " \
      "graph+sync %s us\n", n, e, j, b, s, g}' "$out/$name.log"
  done
done

[[ " $parts " == *" small "* ]] && for round in $(seq "$rounds"); do
  for np in ${SMALL_NP:-2 4}; do
    for algo in ${SMALL_ALGOS:-direct oneshot}; do
      name=small.np$np.$algo.r$round
      fits 30 "$name" || continue
      DCCL_TRANSPORT= DCCL_ALGO=$algo timeout 60 "$build/perf/inproc_allreduce" "$np" 8 64K 1000 2 \
        > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; }
      awk -v n="$name" '$1 ~ /^[0-9]+$/ {b[$1] = $2; s[$1] = $6; k[++m] = $1}
        /^# graph\+sync/ {g[$3] = $(NF-1)}
        END {for (i = 1; i <= m; i++) printf "%s %s B: back to back %s, synchronised %s, graph+sync %s us\n", n, k[i],
          b[k[i]], s[k[i]], g[k[i]]}' "$out/$name.log"
    done
  done
done

[[ " $parts " == *" ceiling "* ]] && fits 60 ceiling && {
  timeout 120 "$build/perf/gpu/pcie_ceiling" 1024 5 > "$out/ceiling.log" 2>&1 ||
    { status=1; echo "FAIL: ceiling"; }
  cat "$out/ceiling.log"
}

[[ " $parts " == *" cta "* ]] && fits 60 cta && {
  timeout 200 "$build/perf/gpu/cta_rate" --kib "${PATHS_CTA_KIB:-32 1024}" --reps 9 > "$out/cta.log" 2>&1 ||
    { status=1; echo "FAIL: cta"; }
  cat "$out/cta.log"
}

ce_run() { # ce_run NAME NP PATH COLL MPIRUN...
  local name=$1 np=$2 path=$3 coll=$4
  shift 4
  fits 100 "$name" || return 0
  DCCL_CE=$([ "$path" = ce ] && echo 1 || echo 0) DCCL_CE_P2P=$([ "$path" = ce ] && echo 1 || echo 0) \
    timeout 150 "$@" -x DCCL_CE -x DCCL_CE_P2P -np "$np" \
    "$build/perf/${coll}_perf" -b 8 -e 64M -f 8 -c 1 -n 5 -w 2 -T 120 -J "$out/$name.json" > "$out/$name.log" 2>&1 ||
    { status=1; echo "FAIL: $name"; tail -3 "$out/$name.log"; }
  awk -v n="$name" '$1 ~ /^[0-9]+$/ {printf "%s %s B: %s us, algbw %s, busbw %s GB/s\n", n, $1, $6, $7, $8}' \
    "$out/$name.log"
}
[[ " $parts " == *" ce "* ]] && for round in $(seq "$rounds"); do
  for np in ${CE_RANKS:-2 4}; do
    for coll in ${CE_COLLS:-all_reduce}; do
      for path in ce kernels; do
        ce_run "ce.np$np.$coll.$path.no_mps.r$round" "$np" "$path" "$coll" mpirun --allow-run-as-root --oversubscribe \
          --bind-to none
      done
    done
  done
done

[[ " $parts " == *" reach "* ]] && for mib in ${PATHS_REACH_MIB:-64 256 1024}; do
  for kind in legacy fd; do
    name=reach.$kind.$mib
    fits 60 "$name" || continue
    timeout 180 "$build/perf/gpu/ipc_reach" --kind "$kind" --mib "$mib" --reps 5 > "$out/$name.log" 2>&1 ||
      { status=1; echo "FAIL: $name"; tail -3 "$out/$name.log"; }
    grep "^ipc_reach\|FAILED" "$out/$name.log"
  done
done

[[ " $parts " == *" staged "* || " $parts " == *" others "* || " $parts " == *" net "* || " $parts " == *" check "* ||
   " $parts " == *" ce "* || " $parts " == *" lazy "* || " $parts " == *" ctas "* ||
   " $parts " == *" stagedknobs "* || " $parts " == *" alloc "* || " $parts " == *" proto "* ||
   " $parts " == *" det "* || " $parts " == *" trace "* || " $parts " == *" stages "* ||
   " $parts " == *" ab "* || " $parts " == *" knob "* || " $parts " == *" mesh "* ]] || exit $status
export CUDA_MPS_PIPE_DIRECTORY=/tmp/dccl-paths-mps CUDA_MPS_LOG_DIRECTORY=/tmp/dccl-paths-mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d || { echo "gpu-lab-paths: MPS did not start"; exit 1; }
trap 'echo quit | nvidia-cuda-mps-control' EXIT
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x CUDA_MPS_PIPE_DIRECTORY -x DCCL_TRANSPORT
     -x DCCL_ALGO -x DCCL_HOSTID -x DCCL_LAZY_MAP_BYTES -x DCCL_MAX_CTAS
     -x DCCL_DEV_CHUNK_SIZE -x DCCL_DEV_NSLOTS -x DCCL_DEV_MEM_LIMIT -x DCCL_PROTO -x DCCL_DETERMINISTIC)
export DCCL_HOSTID=
[[ " $parts " == *" mesh "* ]] && for round in $(seq "$rounds"); do
  for mib in ${PATHS_MESH_MIB:-256 1024}; do
    for kind in ${PATHS_MESH_KINDS:-legacy fd}; do
      for guard in ${PATHS_MESH_GUARD:-0}; do
        name=mesh.$kind.$mib$([ "$guard" = 0 ] || echo ".guard$guard").r$round
        fits 40 "$name" || continue
        timeout 180 "$build/perf/gpu/ipc_mesh" --ranks "${PATHS_MESH_RANKS:-4}" --kind "$kind" --mib "$mib" --reps 5 \
          --guard "$guard" > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; tail -3 "$out/$name.log"; }
        grep "^ipc_mesh\|FAILED" "$out/$name.log" | sed "s/^/$name: /"
      done
    done
  done
done
[[ " $parts " == *" staged "* ]] && for round in $(seq "$rounds"); do
  for np in 2 4; do
    for transport in ${PATHS_STAGED:-p2p windows shm}; do
      name=staged.np$np.$transport.r$round
      fits "$([ $transport = shm ] && echo 120 || echo 45)" "$name" || continue
      DCCL_ALGO= DCCL_TRANSPORT=$([ $transport = shm ] && echo shm) timeout 240 "${mpi[@]}" -np "$np" \
        "$build/perf/all_reduce_perf" -b 8 -e 1G -f 8 -c 1 -n 10 -w 3 -T 220 \
        -R "$([ $transport = windows ] && echo 2 || echo 0)" \
        -J "$out/$name.json" > "$out/$name.log" 2>&1 ||
        { status=1; echo "FAIL: $name"; tail -3 "$out/$name.log"; }
      awk -v n="$name" '$1 ~ /^[0-9]+$/ && ($1 == 8 || $1 == 2097152 || $1 == 134217728 || $1 == 1073741824) {
        printf "%s %s B: %s us, algbw %s, busbw %s GB/s\n", n, $1, $6, $7, $8}' "$out/$name.log"
    done
  done
done

[[ " $parts " == *" stagedknobs "* ]] && for round in $(seq "$rounds"); do
  for cfg in ${PATHS_STAGED_KNOBS:-262144/4/ 1048576/4/ 4194304/4/ 1048576/8/ 262144/4/8 1048576/4/32}; do
    IFS=/ read -r chunk nslots ctas <<< "$cfg"
    name=stagedknobs.np2.c$chunk.s$nslots${ctas:+.ctas$ctas}.r$round
    fits 40 "$name" || continue
    # The FIFOs count against DCCL_DEV_MEM_LIMIT: 1 GiB here, so large slots do not also mean fewer channels.
    DCCL_ALGO= DCCL_TRANSPORT=shm DCCL_DEV_CHUNK_SIZE=$chunk DCCL_DEV_NSLOTS=$nslots DCCL_MAX_CTAS=$ctas \
      DCCL_DEV_MEM_LIMIT=1073741824 timeout 90 \
      "${mpi[@]}" -np 2 "$build/perf/all_reduce_perf" -b 256M -e 256M -c 1 -n 10 -w 3 -T 70 -J "$out/$name.json" \
      > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; tail -3 "$out/$name.log"; }
    awk -v n="$name" '$1 ~ /^[0-9]+$/ {printf "%s %s B: %s us, algbw %s GB/s (27.5: the shared x16 link)\n", n, $1,
      $6, $7}' "$out/$name.log"
  done
done

[[ " $parts " == *" ctas "* ]] && for round in $(seq "$rounds"); do
  for ctas in ${PATHS_CTAS_LIST:-default 28 24 16}; do
    name=ctas.np4.$ctas.r$round
    fits 30 "$name" || continue
    DCCL_ALGO= DCCL_TRANSPORT= DCCL_MAX_CTAS=$([ "$ctas" = default ] || echo "$ctas") timeout 30 \
      "${mpi[@]}" -np 4 "$build/perf/all_reduce_perf" -b 1M -e 256M -f 4 -c 1 -n 200 -w 20 > "$out/$name.log" 2>&1 ||
      { status=1; echo "FAIL: $name"; tail -3 "$out/$name.log"; }
    awk -v n="$name" '$1 ~ /^[0-9]+$/ {printf "%s %s B: %s us\n", n, $1, $6}' "$out/$name.log"
  done
done

[[ " $parts " == *" lazy "* ]] && for round in $(seq "$rounds"); do
  for np in ${PATHS_LAZY_NP:-2 4}; do
    for lazy in on off; do
      name=lazy.np$np.$lazy.r$round
      fits 40 "$name" || continue
      # Checking 1 GiB per rank on the host takes most of a run's time: up to 220 s, within the call's deadline.
      limit=$(( deadline == 0 ? 220 : deadline - $(date +%s) - 10 )); [ $limit -gt 220 ] && limit=220
      DCCL_ALGO= DCCL_TRANSPORT= DCCL_LAZY_MAP_BYTES=$([ $lazy = on ] && echo 0 || echo -1) \
        timeout $((limit + 20)) "${mpi[@]}" -np "$np" "$build/perf/all_reduce_perf" -b "${PATHS_LAZY_BEGIN:-8}" -e 1G \
        -f 2 -c 1 -n 20 -w 3 -T $limit -J "$out/$name.json" \
        > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; tail -3 "$out/$name.log"; }
      awk -v n="$name" '$1 ~ /^[0-9]+$/ && ($1 == 8 || $1 == 32768 || $1 == 131072 || $1 == 262144 ||
        $1 == 524288 || $1 == 2097152 || $1 == 16777216 || $1 == 134217728 || $1 == 1073741824) {
        printf "%s %s B: %s us, algbw %s, busbw %s GB/s\n", n, $1, $6, $7, $8}' "$out/$name.log"
    done
  done
done

# The HBM floor's rate on this machine (perf/gpu/hbm_ceiling: a device-to-device copy's read + write traffic).
hbm_tbps=
[[ " $parts " == *" alloc "* ]] && {
  timeout 60 "$build/perf/gpu/hbm_ceiling" 1024 5 > "$out/hbm_ceiling.log" 2>&1 || { status=1; echo "FAIL: hbm_ceiling"; }
  cat "$out/hbm_ceiling.log"
  hbm_tbps=$(awk '/HBM traffic/ {print $(NF-1)}' "$out/hbm_ceiling.log")
}
[[ " $parts " == *" alloc "* ]] && for round in $(seq "$rounds"); do
  for reg in ${PATHS_ALLOC_REG:-windows lazy}; do
    for alloc in ${PATHS_ALLOC_KINDS:-cudamalloc memalloc}; do
      sets=${PATHS_ALLOC_SETS:-}
      [ -z "$sets" ] && for ctas in ${PATHS_ALLOC_CTAS:-default}; do
        sets+=" $([ "$ctas" = default ] && echo default || echo "DCCL_MAX_CTAS=$ctas")"
      done
      for set in $sets; do
        name=alloc.np4.$reg.$alloc$([ "$set" = default ] || echo ".${set//[=,\/]/_}").r$round
        fits 90 "$name" || continue
        settings=() exports=()
        [ "$set" = default ] || for kv in ${set//,/ }; do settings+=("$kv"); exports+=(-x "${kv%%=*}"); done
        # A stall report after 5 s tells a waiting kernel from a crawling one.
        env DCCL_ALGO= DCCL_TRANSPORT= DCCL_STALL_REPORT_MS=5000 "${settings[@]}" \
          timeout 180 "${mpi[@]}" -x DCCL_STALL_REPORT_MS "${exports[@]}" -np 4 \
          "$build/perf/all_reduce_perf" -b "${PATHS_ALLOC_BEGIN:-256M}" -e 1G -f 2 -c 1 -n 20 -w 3 \
          -R "$([ $reg = windows ] && echo 2 || echo 0)" $([ $alloc = cudamalloc ] || echo "--$alloc") -T 150 \
          -J "$out/$name.json" > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; tail -3 "$out/$name.log"; }
        grep -m 3 "stall report\|waits for" "$out/$name.log"
        awk -v n="$name" -v r="${hbm_tbps:-0}" '$1 ~ /^[0-9]+$/ {
          printf "%s %s B: out of place %s us (busbw %s GB/s), in place %s us", n, $1, $6, $8, $10
          if (r > 0) printf "; of the 2NS floor at %s TB/s: %.0f%%, %.0f%%", r, 100 * 8 * $1 / ($6 * 1e6 * r),
            100 * 8 * $1 / ($10 * 1e6 * r)
          printf "\n"}' "$out/$name.log"
      done
    done
  done
done

[[ " $parts " == *" others "* ]] && for round in $(seq "$rounds"); do
  for coll in ${PATHS_OTHERS_COLLS:-all_gather reduce_scatter broadcast reduce}; do
    for algo in ring default direct; do
      name=others.np4.$coll.$algo.r$round
      fits 30 "$name" || continue
      DCCL_TRANSPORT= DCCL_ALGO=$([ $algo = default ] || echo $algo) timeout 120 "${mpi[@]}" -np 4 \
        "$build/perf/${coll}_perf" -b "${PATHS_OTHERS_BEGIN:-4K}" -e 256M -f 4 -c 1 -n 20 -w 3 -T 100 \
        -R "$([ $algo = direct ] && echo 2 || echo 0)" -J "$out/$name.json" > "$out/$name.log" 2>&1 ||
        { status=1; echo "FAIL: $name"; tail -3 "$out/$name.log"; }
      awk -v n="$name" '$1 ~ /^[0-9]+$/ {printf "%s %s B: %s us, algbw %s, busbw %s GB/s\n", n, $1, $6, $7, $8}' \
        "$out/$name.log"
    done
  done
done

[[ " $parts " == *" net "* ]] && {
  "$build/tests/test_transport_socket" 2>&1 | grep -E "TCP baseline|socket transport:" | tee "$out/net.tcp.log"
  for round in $(seq "$rounds"); do
    for hosts in two one; do
      name=net.np4.$hosts.r$round
      fits 60 "$name" || continue
      DCCL_TRANSPORT= DCCL_ALGO= DCCL_HOSTID=$([ $hosts = two ] && echo A,A,B,B) timeout 100 "${mpi[@]}" -np 4 \
        "$build/perf/all_reduce_perf" -b 8 -e 256M -f 4 -c 1 -n 10 -w 3 -T 80 -J "$out/$name.json" \
        > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; tail -3 "$out/$name.log"; }
      awk -v n="$name" '$1 ~ /^[0-9]+$/ {printf "%s %s B: %s us, algbw %s, busbw %s GB/s\n", n, $1, $6, $7, $8}' \
        "$out/$name.log"
    done
  done
  # The 8-byte all-reduce, 2 ranks: eager and under graph replay, where only the pump's polling finds the work.
  for hosts in two one; do
    name=net.latency.np2.$hosts
    fits 40 "$name" || continue
    DCCL_TRANSPORT= DCCL_ALGO= DCCL_HOSTID=$([ $hosts = two ] && echo A,B) timeout 60 "${mpi[@]}" -np 2 \
      "$build/perf/dev_latency" -n 1000 -r 3 > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; }
    sed "s/^/$name: /" "$out/$name.log" | grep -E "sync|b2b|issue" | tail -8
  done
}
[[ " $parts " == *" ce "* ]] && for round in $(seq "$rounds"); do
  for coll in ${CE_COLLS:-all_reduce}; do
    for path in ce kernels; do
      DCCL_TRANSPORT= DCCL_ALGO= ce_run "ce.np2.$coll.$path.mps.r$round" 2 "$path" "$coll" "${mpi[@]}"
    done
  done
done
[[ " $parts " == *" proto "* ]] && for round in $(seq "$rounds"); do
  for np in ${PROTO_NP:-2 4}; do
    for tool in all_reduce all_gather sendrecv; do
      for proto in bulk default ll; do
        name=proto.np$np.$tool.$proto.r$round
        fits 40 "$name" || continue
        DCCL_TRANSPORT= DCCL_ALGO=$([ $tool = all_reduce ] && echo ring) \
          DCCL_PROTO=$([ $proto = default ] || echo $proto) timeout 60 "${mpi[@]}" -np "$np" "$build/perf/${tool}_perf" -b 8 -e 1M -f 4 -c 1 -n 50 -w 5 -T 50 \
          -J "$out/$name.json" > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; tail -3 "$out/$name.log"; }
        awk -v n="$name" '$1 ~ /^[0-9]+$/ {printf "%s %s B: %s us\n", n, $1, $6}' "$out/$name.log"
      done
    done
  done
done
[[ " $parts " == *" det "* ]] && for round in $(seq "$rounds"); do
  for np in ${DET_NP:-2}; do
    for tool in all_reduce reduce_scatter reduce; do
      for det in 0 1; do
        name=det.np$np.$tool.d$det.r$round
        fits 60 "$name" || continue
        DCCL_TRANSPORT= DCCL_ALGO= DCCL_LAZY_MAP_BYTES=-1 DCCL_DETERMINISTIC=$det timeout 90 "${mpi[@]}" -np "$np" \
          "$build/perf/${tool}_perf" -b 8 -e 256M -f 32 -c 1 -n 20 -w 3 -T 80 -J "$out/$name.json" \
          > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; tail -3 "$out/$name.log"; }
        awk -v n="$name" '$1 ~ /^[0-9]+$/ {printf "%s %s B: %s us, busbw %s GB/s\n", n, $1, $6, $8}' "$out/$name.log"
      done
    done
  done
done
[[ " $parts " == *" knob "* ]] && for round in $(seq "$rounds"); do
  [ -n "${PATHS_KNOB:-}" ] || { echo "skipped knob: PATHS_KNOB names no setting"; break; }
  for setting in $PATHS_KNOB; do
    var=${setting%%=*}
    name=knob.${setting//\//_}.r$round # a path's slashes kept out of the log's name
    fits 40 "$name" || continue
    kb=${PATHS_KNOB_BYTES:-8}
    env DCCL_TRANSPORT= DCCL_ALGO= "$setting" timeout 60 "${mpi[@]}" -x "$var" -np 2 "$build/perf/dev_latency" \
      -b "$kb" -n 2000 -r 3 > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; }
    sed "s/^/$name: /" "$out/$name.log" | grep -E "sync|b2b|issue|check:"
    for algo in default oneshot; do
      env DCCL_TRANSPORT= DCCL_ALGO="$([ $algo = default ] || echo $algo)" "$setting" timeout 30 \
        "$build/perf/inproc_allreduce" 2 "$kb" "$kb" 2000 > "$out/$name.inproc.$algo.log" 2>&1 ||
        { status=1; echo "FAIL: $name inproc $algo"; }
      awk -v n="$name inproc $algo" -v kb="$kb" '/^# empty kernel/ {e = $(NF-1)} /^# one empty kernel/ {j = $(NF-1)}
        /^# graph\+sync/ {g = $(NF-1)} $1 == kb {b = $2; s = $6}
        END {printf "%s %s B: empty+sync %s, joined+sync %s, back to back %s, synchronised %s, graph+sync %s us\n",
             n, kb, e, j, b, s, g}' "$out/$name.inproc.$algo.log"
    done
  done
done

[[ " $parts " == *" check "* ]] && for round in $(seq "$rounds"); do
  for checks in on off; do
    name=check.$checks.r$round
    fits 30 "$name" || continue
    DCCL_TRANSPORT= DCCL_ALGO= DCCL_CHECK=$([ $checks = off ] && echo 0 || echo 1) \
      DCCL_STALL_REPORT_MS=$([ $checks = off ] && echo 0 || echo 10000) timeout 60 "${mpi[@]}" \
      -x DCCL_CHECK -x DCCL_STALL_REPORT_MS -np 2 "$build/perf/dev_latency" -n 2000 -r 3 > "$out/$name.log" 2>&1 ||
      { status=1; echo "FAIL: $name"; }
    sed "s/^/$name: /" "$out/$name.log" | grep -E "ar\+sync|ar b2b|graph b2b|check:"
  done
done
[[ " $parts " == *" trace "* ]] && {
  lib=$build/perf/gpu/libdccl_kernel_trace.so
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  if [ -f "$lib" ] && ldd "$lib" | grep -q "not found"; then # CUPTI elsewhere: the toolkit's lib64 or PyTorch's
    cupti=$(find /usr/local/cuda/ /usr/local/cuda/extras /opt/torch/.venv -name 'libcupti.so.13*' 2>/dev/null | head -1)
    [ -n "$cupti" ] && export LD_LIBRARY_PATH=$(dirname "$cupti")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
  if [ ! -f "$lib" ] || ldd "$lib" | grep -q "not found"; then
    echo "trace: $lib not built or not loadable (no CUPTI here?)"; ldd "$lib" 2>&1 | grep "not found"
  else
    for what in ${PATHS_TRACE_CASES:-ar+sync empty+sync fat+sync inproc inproc-oneshot}; do
      name=trace.${what/:/.}
      fits 60 "$name" || continue
      rm -rf "$out/$name" && mkdir -p "$out/$name"
      if [[ $what == np4:* ]]; then
        DCCL_TRANSPORT= DCCL_ALGO= CUDA_INJECTION64_PATH=$lib KERNEL_TRACE_DIR=$out/$name timeout 60 "${mpi[@]}" \
          -x CUDA_INJECTION64_PATH -x KERNEL_TRACE_DIR -x LD_LIBRARY_PATH -np 4 "$build/perf/all_reduce_perf" \
          -b "${what#np4:}" -e "${what#np4:}" -n 2000 -w 16 -c 0 > "$out/$name.log" 2>&1 ||
          { status=1; echo "FAIL: $name"; }
      elif [[ $what == inproc* ]]; then
        DCCL_TRANSPORT= DCCL_ALGO=$([ $what = inproc-oneshot ] && echo oneshot) CUDA_INJECTION64_PATH=$lib \
          KERNEL_TRACE_DIR=$out/$name timeout 60 \
          "$build/perf/inproc_allreduce" 2 8 8 2000 > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; }
      else
        DCCL_TRANSPORT= DCCL_ALGO= CUDA_INJECTION64_PATH=$lib KERNEL_TRACE_DIR=$out/$name timeout 60 "${mpi[@]}" \
          -x CUDA_INJECTION64_PATH -x KERNEL_TRACE_DIR -x LD_LIBRARY_PATH -np 2 \
          "$build/perf/dev_latency" -n 2000 -r 1 -m "$what" > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; }
      fi
      grep -E "kernel_trace|sync|^ *[0-9]+ " "$out/$name.log" | sed "s/^/$name: /" | head -5
      python3 "$here/../perf/kernel_trace_report.py" "$out/$name" --last 2000 \
        --pattern "$(case $what in empty+sync) echo empty ;; fat+sync) echo fat ;; *) echo dccl_kernel ;; esac)" \
        > "$out/$name.txt" 2>&1
      sed "s/^/$name: /" "$out/$name.txt"
      kernels=$(cat "$out/$name"/trace.*.tsv 2>/dev/null | grep -c "^K")
      tar -czf "$out/$name.tgz" -C "$out" "$name" && rm -rf "${out:?}/$name"
      # A tracer that records nothing here (CUPTI under MPS, say) would cost the call a minute a run: stop.
      [ "$kernels" -gt 0 ] || { echo "trace: no kernel recorded; the other runs skipped"; break; }
    done
  fi
}
# A library packed by scripts/gpu-carry.sh (a .tar.gz) or a folder: the folder holding its libdccl.so.0.
lib_dir() { # lib_dir PATH NAME
  local dir=$1
  if [[ $dir == *.tar.gz ]]; then
    mkdir -p "$out/$2" && tar -xzf "$dir" -C "$out/$2" && dir=$out/$2
  fi
  [ -f "$dir/libdccl.so.0" ] && echo "$dir"
}
[[ " $parts " == *" stages "* ]] && fits 60 stages && {
  # PATHS_STAGES_LIB: a stage-timing library built elsewhere (scripts/gpu-carry.sh, GPU_CARRY_STAGES) saves the
  # call the build's 2 minutes; this build's tools run with it first on LD_LIBRARY_PATH.
  stages_lib=
  if [ -n "${PATHS_STAGES_LIB:-}" ]; then
    stages_lib=$(lib_dir "$PATHS_STAGES_LIB" stages-lib) || { status=1; echo "FAIL: stages: no library in $PATHS_STAGES_LIB"; }
    stages_tools=$build
  elif fits 200 stages; then
    stages_tools=$build-stages
    stages_lib=$stages_tools
    { cmake -S "$(dirname "${BASH_SOURCE[0]}")/.." -B "$stages_tools" -G Ninja -DDCCL_DEV_STAGES=ON \
        -DDCCL_BUILD_TESTS=OFF &&
      ninja -C "$stages_tools" dev_latency inproc_allreduce all_reduce_perf; } > "$out/stages.build.log" 2>&1 ||
      { status=1; stages_lib=; echo "FAIL: stages build"; tail -5 "$out/stages.build.log"; }
  fi
  [ -n "$stages_lib" ] && for what in ${PATHS_STAGES_CASES:-ar+sync inproc inproc-oneshot}; do
    name=stages.${what/:/.}
    fits 40 "$name" || continue
    if [[ $what == np4:* ]]; then
      DCCL_TRANSPORT= DCCL_ALGO= LD_LIBRARY_PATH=$stages_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 60 \
        "${mpi[@]}" -x LD_LIBRARY_PATH -np 4 "$stages_tools/perf/all_reduce_perf" -b "${what#np4:}" -e "${what#np4:}" \
        -n 2048 -w 16 -c 0 > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; }
      awk -v n="$name" '$1 ~ /^[0-9]+$/ {printf "%s: %s B out of place %s us, in place %s us\n", n, $1, $6, $10}' \
        "$out/$name.log"
    elif [[ $what == inproc* ]]; then
      DCCL_TRANSPORT= DCCL_ALGO=$([ $what = inproc-oneshot ] && echo oneshot) \
        LD_LIBRARY_PATH=$stages_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 60 \
        "$stages_tools/perf/inproc_allreduce" 2 8 8 4096 > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; }
    else
      DCCL_TRANSPORT= DCCL_ALGO= LD_LIBRARY_PATH=$stages_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 60 \
        "${mpi[@]}" -x LD_LIBRARY_PATH -np 2 "$stages_tools/perf/dev_latency" -n 4096 -r 1 -m ar+sync \
        > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; }
    fi
    grep -E "ar\+sync|^ +8 " "$out/$name.log" | sed "s/^/$name: /" | head -2
    { grep "dccl kernel stages" "$out/$name.log" | tail -1; grep "dccl launch spread" "$out/$name.log" | tail -1; } |
      sed "s/^/$name: /"
  done
}
[[ " $parts " == *" ab "* ]] && {
  # Every library of PATHS_AB_BASE (space-separated), then this build's, named by the code each was built from.
  names=() dirs=() k=0
  for b in ${PATHS_AB_BASE:-}; do
    k=$((k + 1))
    if ! d=$(lib_dir "$b" "ab-base$k"); then
      status=1; echo "FAIL: ab: $b holds no libdccl.so.0"; continue
    fi
    names+=("$( [ -f "$d/carried-from" ] && tail -1 "$d/carried-from" || echo "base$k")") dirs+=("$d")
  done
  names+=("$( [ -f "$build/carried-from" ] && sed -n 3p "$build/carried-from" ||
    git -C "$(dirname "${BASH_SOURCE[0]}")" describe --always --dirty 2>/dev/null || echo new)")
  dirs+=("$build")
  [ ${#dirs[@]} -gt 1 ] || { status=1; echo "FAIL: ab: PATHS_AB_BASE ('${PATHS_AB_BASE:-}') names no library"; }
  echo "ab: ${names[*]} (the last is this build)"
  keep() { tee -a "$out/ab.txt"; } # every figure, for the medians at the end (perf/ab_report.py)
  ab_case() { [[ " ${PATHS_AB_CASES:-mps ring tree inproc bulk} " == *" $1 "* ]]; }
  [ ${#dirs[@]} -gt 1 ] && for round in $(seq "$rounds"); do
    for k in "${!dirs[@]}"; do
      lib=${names[$k]} libdir=${dirs[$k]}
      LD_LIBRARY_PATH_AB=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
      name=ab.$lib.mps.r$round
      # Each run takes 2-5 s on an H100; its timeout is what fits() must leave room for.
      ab_case mps && fits 20 "$name" && {
        DCCL_TRANSPORT= DCCL_ALGO= LD_LIBRARY_PATH=$LD_LIBRARY_PATH_AB timeout 20 \
          "${mpi[@]}" -x LD_LIBRARY_PATH -np 2 "$build/perf/dev_latency" -n 2000 -r 1 \
          -m empty+sync,meet+sync,ar+sync,ar\ b2b,ar\ issue,empty\ issue,fat\ issue,ptr\ query,graph+sync \
          > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; }
        grep -E "empty\+sync|meet\+sync|ar\+sync|ar b2b|issue|ptr query|graph\+sync" "$out/$name.log" |
          sed "s/^/$name: /" | keep
      }
      name=ab.$lib.np4.r$round # 4 ranks' default all-reduce at middle sizes (the direct path, unregistered)
      ab_case np4 && fits 20 "$name" && {
        DCCL_TRANSPORT= DCCL_ALGO= LD_LIBRARY_PATH=$LD_LIBRARY_PATH_AB timeout 20 \
          "${mpi[@]}" -x LD_LIBRARY_PATH -np 4 "$build/perf/all_reduce_perf" -b 1M -e 64M -f 4 -c 1 -n 500 -w 20 \
          > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; }
        awk -v n="$name" '$1 ~ /^[0-9]+$/ {printf "%s: %s B %s us\n", n, $1, $6}' "$out/$name.log" | keep
      }
      name=ab.$lib.floor4.r$round # 4 ranks' 1 MiB all-reduce beside kernels that only meet, in its shape
      ab_case floor4 && fits 30 "$name" && {
        DCCL_TRANSPORT= DCCL_ALGO= LD_LIBRARY_PATH=$LD_LIBRARY_PATH_AB timeout 30 \
          "${mpi[@]}" -x LD_LIBRARY_PATH -np 4 "$build/perf/dev_latency" -b 1M -n 2000 -r 1 -c 32 \
          -m empty\ b2b,meet\ b2b,wide\ meet\ b2b,ar\ b2b > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; }
        grep -E "b2b" "$out/$name.log" | sed "s/^/$name: /" | keep
      }
      name=ab.$lib.np2.r$round # 2 ranks' default all-reduce where the CTA rules of 2 and 4 ranks differ
      ab_case np2 && fits 20 "$name" && {
        DCCL_TRANSPORT= DCCL_ALGO= LD_LIBRARY_PATH=$LD_LIBRARY_PATH_AB timeout 20 \
          "${mpi[@]}" -x LD_LIBRARY_PATH -np 2 "$build/perf/all_reduce_perf" -b 256K -e 4M -f 2 -c 1 -n 500 -w 20 \
          > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; }
        awk -v n="$name" '$1 ~ /^[0-9]+$/ {printf "%s: %s B %s us\n", n, $1, $6}' "$out/$name.log" | keep
      }
      for coll in all_gather reduce_scatter broadcast; do # the other direct collectives, 4 ranks, middle sizes
        ab_case np4coll || continue
        name=ab.$lib.np4-$coll.r$round
        fits 20 "$name" || continue
        DCCL_TRANSPORT= DCCL_ALGO= LD_LIBRARY_PATH=$LD_LIBRARY_PATH_AB timeout 20 "${mpi[@]}" -x LD_LIBRARY_PATH -np 4 \
          "$build/perf/${coll}_perf" -b 64K -e 16M -f 4 -c 1 -n 200 -w 20 > "$out/$name.log" 2>&1 ||
          { status=1; echo "FAIL: $name"; }
        awk -v n="$name" '$1 ~ /^[0-9]+$/ {printf "%s: %s B %s us\n", n, $1, $6}' "$out/$name.log" | keep
      done
      for algo in ring tree; do # the bulk steps (generic kernel), where each step's bookkeeping shows
        ab_case "$algo" || continue
        name=ab.$lib.$algo.r$round
        fits 30 "$name" || continue
        DCCL_TRANSPORT= DCCL_ALGO=$algo LD_LIBRARY_PATH=$LD_LIBRARY_PATH_AB timeout 60 \
          "${mpi[@]}" -x LD_LIBRARY_PATH -np 2 "$build/perf/all_reduce_perf" -b 8 -e 128M -f 8 -c 1 -n 50 -w 5 \
          > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; }
        awk -v n="$name" '$1 ~ /^[0-9]+$/ && ($1 == 8 || $1 == 32768 || $1 == 134217728) {
          printf "%s: %s B %s us\n", n, $1, $6}' "$out/$name.log" | keep
      done
      for algo in default direct oneshot; do
        ab_case inproc || continue
        name=ab.$lib.inproc-$algo.r$round
        fits 20 "$name" || continue
        DCCL_TRANSPORT= DCCL_ALGO=$([ $algo = default ] || echo $algo) LD_LIBRARY_PATH=$LD_LIBRARY_PATH_AB \
          timeout 30 "$build/perf/inproc_allreduce" 2 8 8 2000 > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; }
        awk -v n="$name" '$1 == 8 {printf "%s: 8 B %s us back to back, %s us synchronised after each\n", n, $2,
          $6}' "$out/$name.log" | keep
      done
      name=ab.$lib.inproc-direct-bulk.r$round # the direct path's bulk loop (generic kernel), 128 MiB
      ab_case bulk && fits 30 "$name" || continue
      DCCL_TRANSPORT= DCCL_ALGO=direct LD_LIBRARY_PATH=$LD_LIBRARY_PATH_AB timeout 60 \
        "$build/perf/inproc_allreduce" 2 128M 128M 20 > "$out/$name.log" 2>&1 || { status=1; echo "FAIL: $name"; }
      awk -v n="$name" '$1 ~ /^[0-9]+$/ {printf "%s: %s B %s us\n", n, $1, $2}' "$out/$name.log" | keep
    done
  done
  [ -s "$out/ab.txt" ] && python3 "$(dirname "${BASH_SOURCE[0]}")/../perf/ab_report.py" < "$out/ab.txt"
}
exit $status
