#!/usr/bin/env bash
# The GPU machine's script: builds DCCL with the CUDA toolkit and runs everything that needs a GPU, writing the
# logs to $OUT (the device tool brings them back) or ./gpu-lab-out. Each part fits one device call (10 minutes);
# the build is kept in the build folder, so a later part reuses it.
#   tests: `ctest -L gpu`: the shared device code, the host library beside a GPU, the connection FIFOs (kernel <->
#          host thread, kernel <-> kernel across processes under MPS), graphs, every device collective with 1-4 ranks
#          of one process and every algorithm, ncclMemAlloc buffers, a small memory limit, 1 GiB all-reduces, two
#          communicators at once, and ranks in processes of their own (mpirun and the TCP bootstrap, under MPS and
#          a few cases without)
#   perf:  the perf tools on device buffers under MPS (every tool checked at 2-3 ranks; all-reduce timed 8 B-1 GiB
#          at 1, 2, 4 ranks), the 8-byte latency beside an empty kernel and under graph replay, and the 256 MiB
#          all-reduce over fence scopes, slot sizes and channel counts (about 5 min)
#   paths: the direct all-reduce (ranks of one process) against the ring, and the staged path (FIFOs in pinned
#          host memory, DCCL_TRANSPORT=shm) and windows (direct between processes) against p2p, 2 and 4 ranks,
#          8 B-1 GiB; all-gather, reduce-scatter, broadcast direct against the ring; two pretend hosts (device links
#          over sockets) against one, beside loopback TCP (scripts/gpu-lab-paths.sh; all of it is more than one
#          call: PATHS_PARTS and ROUNDS narrow it; PATHS_PARTS=check measures issue 14's checks on the GPU)
#   gloo:  DCCL against PyTorch gloo with CUDA tensors, 2 and 4 ranks (perf/gloo_vs_dccl.sh, about 3 min)
#   dropin: unmodified NCCL programs on DCCL's libnccl.so.2 (scripts/gpu-lab-dropin.sh, issue 12): nccl-tests at 1
#          rank beside NVIDIA's NCCL; every nccl-tests binary and flag variant at 2 and 4 ranks on the GPU under
#          MPS, checked, each rank's /proc/PID/maps recorded; DCCL's perf tools beside them; PyTorch collectives,
#          DDP against gloo, nonblocking, subgroups. More than one device call: DROPIN_* narrow it. The nccl-tests
#          sources (../shared) do not travel to the device: build and pack them here with scripts/gpu-carry.sh and
#          run gpu-lab-dropin.sh on the device directly (its header has the command)
#   nccl:  NVIDIA's NCCL against DCCL's libnccl.so.2 under nccl-tests (perf/nccl_vs_dccl.sh, issue 13): every GPU
#          count the machine has, one rank per GPU; on a one-GPU machine also DCCL alone with 2 ranks on it
#          (NVD_* narrow it to fit a call)
#   fileload: files into GPU memory (issue 16): a 4 GiB file on the root disk, the disk's rate (dd iflag=direct),
#          perf/file_load_gpu_perf with 4 ranks under MPS against pread + cudaMemcpy, warm and cold, then
#          the page cache registered with CUDA and copied from in place (perf/page_cache_dma_perf), then
#          numpy.fromfile + torch .cuda() on the same file (perf/file_load_torch.py; about 5 min). FILELOAD_PATHS
#          ("default direct": also every chunk O_DIRECT), FILELOAD_RANKS, FILELOAD_ROUNDS, FILELOAD_REGISTERED=0,
#          FILELOAD_TORCH=0 narrow it
#   all:   tests, perf and gloo, one after the other (the default; more than one device call's time)
#   measure: the measurements of docs/gpu.md (scripts/gpu-lab-measure.sh)
# GPU_LAB_PREBUILT=build-carry/gpu-build.tar.gz: use the build packed by scripts/gpu-carry.sh (from a checkout at the
# same relative build path as the build dir given here) instead of building. GPU_LAB_LIB=DIR, or a base-lib.tar.gz as
# scripts/gpu-carry.sh packs it: its libdccl.so.0 then takes the carried library's place (a library built alone from
# a branch, run through the carried tests and tools), and names the build in the A/B tables.
# Several parts in one call: quoted, "tests paths" (PATHS_PARTS still picks the paths' parts).
# Usage: bash scripts/gpu-lab.sh [tests|perf|paths|gloo|dropin|nccl|fileload|all|measure] [build dir=build-gpu]
set -uo pipefail
parts=${1:-all}
[ $# -gt 0 ] && shift
here=$(dirname "${BASH_SOURCE[0]}")
[ "$parts" = measure ] && exec bash "$here/gpu-lab-measure.sh" "$@"
build=${1:-build-gpu}
out=${OUT:-gpu-lab-out}
# The part's time (a device call allows 600 s): the paths part skips runs that would not end before it.
export GPU_LAB_DEADLINE=${GPU_LAB_DEADLINE:-$(($(date +%s) + ${GPU_LAB_BUDGET_S:-560}))}
mkdir -p "$out"
OUT_ABS=$(cd "$out" && pwd)
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nvcc --version | tail -2
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"

start=$(date +%s)
if [ -n "${GPU_LAB_PREBUILT:-}" ]; then
  # A build made elsewhere (scripts/gpu-carry.sh) saves the device its ~150 s build: its ctest files and RUNPATHs
  # name the checkout it was built in, so that path is made to lead here.
  { read -r src; read -r rel; read -r code; } < <(tar -xzOf "$GPU_LAB_PREBUILT" ./carried-from)
  [ "$rel" = "$build" ] || { echo "gpu-lab: the carried build must be unpacked as $rel (not $build)"; exit 1; }
  if [ "$(readlink -f "$src")" != "$(pwd -P)" ]; then
    [ -e "$src" ] && { echo "gpu-lab: $src exists and is not this checkout"; exit 1; }
    mkdir -p "$(dirname "$src")" && ln -s "$(pwd -P)" "$src"
  fi
  # Only an absent build or an earlier carried one is replaced (never a build made here).
  if [ -e "$build" ] && [ ! -e "$build/carried-from" ]; then echo "gpu-lab: $build is not a carried build"; exit 1; fi
  rm -rf "$build" && mkdir -p "$build" && tar -xzf "$GPU_LAB_PREBUILT" -C "$build" || exit 1
  echo "gpu-lab: carried build of $src/$rel (code ${code:-unknown}) unpacked in $(($(date +%s) - start)) s"
  if [ -n "${GPU_LAB_LIB:-}" ]; then
    lib=$GPU_LAB_LIB
    if [[ $lib == *.tar.gz ]]; then lib=$(mktemp -d) && tar -xzf "$GPU_LAB_LIB" -C "$lib" || exit 1; fi
    cp "$lib/libdccl.so.0" "$(readlink -f "$build/libdccl.so.0")" || exit 1
    lib_code=$(head -1 "$lib/carried-from" 2>/dev/null)
    echo "gpu-lab: library from $GPU_LAB_LIB (${lib_code:-unknown})"
    # The build is named by its library's code from here on (the paths part's A/B tables).
    [ -n "$lib_code" ] && sed -i "3s/.*/$lib_code/" "$build/carried-from"
  fi
elif ! { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
         ninja -C "$build" $(cat "$here/gpu-targets.txt") &&
         { ! ninja -C "$build" -t targets all | grep -q '^dccl_kernel_trace:' || ninja -C "$build" dccl_kernel_trace; }
       } > "$out/build.log" 2>&1; then
  tail -40 "$out/build.log"
  echo "gpu-lab: build failed"
  exit 1
else
  echo "gpu-lab: built in $(($(date +%s) - start)) s"
fi

status=0
# The GPU suite: every ctest case labelled gpu (tests/cuda/cuda_tests.cmake), one at a time. Its whole output goes
# to ctest-gpu.log (verbose, appended); the lines that carry a result or a figure are printed here. GPU_TESTS and
# GPU_TESTS_EXCLUDE (ctest -R / -E regular expressions) pick some; GPU_TEST_TIMEOUT (300 s) bounds each,
# GPU_SUITE_TIMEOUT (480 s) all.
tests() {
  local rc
  (cd "$build" && timeout "${GPU_SUITE_TIMEOUT:-480}" ctest -L gpu ${GPU_TESTS:+-R "$GPU_TESTS"} \
     ${GPU_TESTS_EXCLUDE:+-E "$GPU_TESTS_EXCLUDE"} --timeout "${GPU_TEST_TIMEOUT:-300}" -V >> "$OUT_ABS/ctest-gpu.log" 2>&1)
  rc=$?
  grep -E "Test +#[0-9]+:.*(Passed|Failed|Skipped|Timeout|\*\*\*)|tests passed|tests failed" "$out/ctest-gpu.log" |
    sed 's/  */ /g' | tail -40
  sed -E 's/^[0-9]+: //' "$out/ctest-gpu.log" |
    grep -E "^FAIL|per round trip|GB/s of payload|MiB per rank|[0-9]+ passed, [0-9]+ failed|^coll_suite:|channels run on|^rank [0-9]: the all-reduce ended" |
    sort | uniq -c | sort -rn | cut -c1-220 | head -60
  [ "$rc" = 0 ] || { status=1; echo "gpu-lab: ctest -L gpu exit $rc"; }
}

for part in $parts; do # one call may run several parts ("tests paths"), built or unpacked once
case $part in
  tests) tests ;;
  perf) bash "$here/gpu-lab-perf.sh" "$build" "$out" || status=1 ;;
  paths) # its many logs come back as one archive (the device tool returns few files)
    bash "$here/gpu-lab-paths.sh" "$build" "$out/paths" || status=1
    tar -czf "$out/paths.tgz" -C "$out" paths && rm -rf "$out/paths"
    ;;
  gloo) bash perf/gloo_vs_dccl.sh "$build" "$out" 3 "2 4" | tee "$out/gloo_vs_dccl.md" || status=1 ;;
  fileload)
    file=/var/tmp/dccl-load-4g.bin
    [ -s "$file" ] || head -c 4G /dev/urandom > "$file"
    # The disk's own read rate, the cold bar's reference (issue 16: >= 90% of it).
    dd if="$file" of=/dev/null bs=4M iflag=direct 2>&1 | tail -1 | sed 's/^/disk, dd iflag=direct: /' |
      tee "$out/file_load_gpu_perf.txt"
    # FILELOAD_PATHS: DCCL's ways to read (default: the bounce; direct: its O_DIRECT reads), each its own run.
    for path in ${FILELOAD_PATHS:-default}; do
      echo "DCCL_FILE_PATH=${path/default/}" | tee -a "$out/file_load_gpu_perf.txt"
      DCCL_FILE_PATH=${path/default/} bash tests/cuda/with_mps.sh "$build/perf/file_load_gpu_perf" "$file" \
        "${FILELOAD_RANKS:-4}" "${FILELOAD_ROUNDS:-3}" | tee -a "$out/file_load_gpu_perf.txt" || status=1
    done
    # The page cache registered with CUDA and copied by the GPU, against DCCL's load (FILELOAD_REGISTERED=0: not).
    [ "${FILELOAD_REGISTERED:-1}" = 0 ] ||
      "$build/perf/page_cache_dma_perf" "$file" "${FILELOAD_ROUNDS:-3}" | tee -a "$out/file_load_gpu_perf.txt" ||
      status=1
    [ "${FILELOAD_TORCH:-1}" = 0 ] ||
      python3 perf/file_load_torch.py "$file" 3 | tee -a "$out/file_load_gpu_perf.txt" || status=1
    ;;
  nccl)
    bash perf/nccl_vs_dccl.sh "$build" "$out/nccl" || status=1
    if [ "$(nvidia-smi -L | grep -c '^GPU')" = 1 ]; then
      NVD_RANKS_PER_GPU=2 bash perf/nccl_vs_dccl.sh "$build" "$out/nccl-2ranks" || status=1
    fi
    ;;
  dropin)
    NVD_BUILD_ONLY=1 bash perf/nccl_vs_dccl.sh "$build" "$out/nccl" | tail -3 &&
      bash "$here/gpu-lab-dropin.sh" "$build" "$out/nccl/nccl-tests" "$out/dropin" || status=1
    ;;
  all)
    tests
    bash "$here/gpu-lab-perf.sh" "$build" "$out" || status=1
    bash perf/gloo_vs_dccl.sh "$build" "$out" 3 "2 4" | tee "$out/gloo_vs_dccl.md" || status=1
    ;;
  *) echo "usage: gpu-lab.sh [tests|perf|paths|gloo|dropin|nccl|all|measure] [build dir]"; exit 2 ;;
esac
done
echo "gpu-lab: $parts $([ $status = 0 ] && echo 'all passed' || echo FAILED) in $(($(date +%s) - start)) s"
exit $status
