#!/usr/bin/env bash
# ctest perf.plot_busbw: a tiny 2-rank -J run of a perf tool, then plot_busbw.py on its JSON (linear and, with
# --log-y, logarithmic axes); fails unless each PNG exists, is not empty, starts with the PNG signature and has an
# image header of nonzero width and height.
# Usage: perf/plot_test.sh MPIEXEC PERF_TOOL PLOT_SCRIPT WORK_DIR
set -euo pipefail
[[ $# -eq 4 ]] || { echo "usage: $0 MPIEXEC PERF_TOOL PLOT_SCRIPT WORK_DIR" >&2; exit 2; }
mpiexec=$1 tool=$2 plot=$3 work=$4
mkdir -p "$work"
json=$work/plot_test.json
png=$work/plot_test.png
rm -f "$json" "$png"

"$mpiexec" --allow-run-as-root --oversubscribe --bind-to none -np 2 "$tool" -b 8 -e 64K -f 4 -n 2 -w 1 -c 1 -M 1 \
  -T 120 -J "$json"
check_png() {
  local png=$1
  [[ -s $png ]] || { echo "plot_test: $png is missing or empty" >&2; exit 1; }
  # 8 signature bytes, then the IHDR chunk: length (4), "IHDR", width (4), height (4), all big-endian.
  header=$(head -c 24 "$png" | od -An -v -tx1 | tr -d ' \n')
  [[ ${header:0:16} == 89504e470d0a1a0a && ${header:24:8} == 49484452 ]] ||
    { echo "plot_test: $png does not start like a PNG: $header" >&2; exit 1; }
  width=$((16#${header:32:8})) height=$((16#${header:40:8}))
  ((width > 0 && height > 0)) || { echo "plot_test: $png is ${width}x${height}" >&2; exit 1; }
  echo "plot_test: $png is a ${width}x${height} PNG of $(stat -c %s "$png") bytes"
}
"$plot" -o "$png" "$json"
check_png "$png"
"$plot" --log-y -o "$work/plot_test_log.png" "$json"
check_png "$work/plot_test_log.png"
