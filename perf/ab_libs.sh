#!/usr/bin/env bash
# Before/after on the host: the same all_reduce_perf binary run alternately against two builds of libdccl
# (LD_LIBRARY_PATH picks the library), 2 ranks bound to cores, float32 sum, slowest rank's time, Open MPI's
# MPI_Allreduce timed in the same run. RUNS alternating pairs per size group; prints each size's median time
# before and after, their ratio, and MPI's median. The cost model's constants are fixed in both builds
# (DCCL_TUNE_ALPHA_NS, DCCL_TUNE_BW_MBPS, defaults below): measured per run they swing several-fold here and flip
# the algorithm choice, which would compare the probe rather than the engines.
# Usage: perf/ab_libs.sh BEFORE_LIB_DIR AFTER_LIB_DIR [runs=9] [perf binary=build/perf/all_reduce_perf]
set -euo pipefail
before=$1
after=$2
runs=${3:-9}
tool=${4:-build/perf/all_reduce_perf}
root_flags=()
[ "$(id -u)" = 0 ] && root_flags=(--allow-run-as-root)
export DCCL_TUNE_ALPHA_NS=${DCCL_TUNE_ALPHA_NS:-200} DCCL_TUNE_BW_MBPS=${DCCL_TUNE_BW_MBPS:-5300}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$runs"); do
  for side in before after; do
    dir=$before
    [ "$side" = after ] && dir=$after
    # 8 B: many iterations; 1 MiB: enough to leave cold caches behind; 16 and 64 MiB: fewer (MPI is slow there).
    for sizes in "8 8 2 2000 100" "1M 1M 2 500 50" "16M 64M 4 20 3"; do
      read -r b e f n w <<< "$sizes"
      mpirun "${root_flags[@]}" --bind-to core -np 2 -x LD_LIBRARY_PATH="$dir" -x DCCL_TUNE_ALPHA_NS \
        -x DCCL_TUNE_BW_MBPS "$tool" --host -b "$b" -e "$e" \
        -f "$f" -c 0 -M 1 -a 3 -n "$n" -w "$w" | grep -E '^ +[0-9]' | awk -v s="$side" '{print s, $1, $6, $14}' \
        >> "$tmp/rows"
    done
  done
  echo "pair $r done ($(cut -d' ' -f1-3 /proc/loadavg))" >&2
done
# The machine drifts between fast and slow spells that slow Open MPI as much as DCCL: each run's time over the
# MPI time of the same run cancels them, so the last columns compare those ratios.
echo "| size (B) | before (us) | after (us) | after/before | Open MPI (us) | before/MPI | after/MPI | ratio after/before |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for size in $(awk '{print $2}' "$tmp/rows" | sort -n | uniq); do
  med() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
  b=$(awk -v z="$size" '$1 == "before" && $2 == z {print $3}' "$tmp/rows" | med)
  a=$(awk -v z="$size" '$1 == "after" && $2 == z {print $3}' "$tmp/rows" | med)
  m=$(awk -v z="$size" '$2 == z {print $4}' "$tmp/rows" | med)
  rb=$(awk -v z="$size" '$1 == "before" && $2 == z {print $3 / $4}' "$tmp/rows" | med)
  ra=$(awk -v z="$size" '$1 == "after" && $2 == z {print $3 / $4}' "$tmp/rows" | med)
  awk -v s="$size" -v b="$b" -v a="$a" -v m="$m" -v rb="$rb" -v ra="$ra" 'BEGIN {
    printf "| %d | %.2f | %.2f | %.3f (%+.2f us) | %.2f | %.3f | %.3f | %.3f |\n", s, b, a, a / b, a - b, m, rb, ra, ra / rb}'
done
