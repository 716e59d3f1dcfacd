#!/usr/bin/env bash
# The benchmark of docs/performance.md: float32 sum all-reduce, DCCL against Open MPI's MPI_Allreduce in the same
# run (all_reduce_perf -M 1), slowest rank's time (-a 3), ranks bound to cores. Each configuration runs REPEAT
# times and the median of each size's times is reported, since a shared 2-core VM is noisy.
# Usage: perf/bench_vs_mpi.sh [build dir=build] [ranks...=2 4]    Environment: REPEAT (default 3)
set -euo pipefail
build=${1:-build}
shift || true
ranks=${*:-2 4}
repeat=${REPEAT:-3}
root_flags=()
[ "$(id -u)" = 0 ] && root_flags=(--allow-run-as-root)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$build/perf/copy_bw" 2 256 5
for np in $ranks; do
  bind=(--bind-to core)
  [ "$np" -gt "$(nproc)" ] && bind=(--oversubscribe --bind-to none)
  for r in $(seq "$repeat"); do
    # Small sizes: many iterations; the largest fewer (Open MPI takes 10-60 ms per call above 16 MiB here). Too
    # few iterations at 1-4 MiB time cold caches and page faults rather than the steady state.
    for sizes in "8 64K 8 2000 100" "1M 4M 4 200 20" "16M 64M 4 20 3"; do
      read -r b e f n w <<< "$sizes"
      mpirun "${root_flags[@]}" "${bind[@]}" -np "$np" "$build/perf/all_reduce_perf" -b "$b" -e "$e" -f "$f" -c 0 \
        -M 1 -a 3 -n "$n" -w "$w" | grep -E '^ +[0-9]' >> "$tmp/np$np"
    done
  done
  echo
  echo "## $np ranks (median of $repeat runs)"
  echo "| size (B) | DCCL time (us) | DCCL algbw (GB/s) | MPI time (us) | MPI algbw (GB/s) | algbw DCCL/MPI |"
  echo "| ---: | ---: | ---: | ---: | ---: | ---: |"
  # columns: 1 size, 6 oop time, 14 mpi time
  sort -n -k1,1 -k6,6 "$tmp/np$np" | awk '{t[$1] = t[$1] " " $6; m[$1] = m[$1] " " $14} END {
      for (s in t) print s, t[s], "|", m[s] }' | sort -n | awk '
    function median(str,   a, n, i, j, v) {
      n = split(str, a, " ")
      for (i = 2; i <= n; i++) { v = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > v; j--) a[j + 1] = a[j]; a[j + 1] = v }
      return a[int((n + 1) / 2)] }
    { split($0, parts, "|"); n = split(parts[1], x, " "); size = x[1]; dt = ""; for (i = 2; i <= n; i++) dt = dt " " x[i];
      d = median(dt); m = median(parts[2]);
      printf "| %d | %.2f | %.2f | %.2f | %.2f | %.2f |\n", size, d, size / d / 1e3, m, size / m / 1e3, m / d }'
done
