#!/usr/bin/env bash
# DCCL's device all-reduce against PyTorch gloo with CUDA tensors (issue 10's peer), in one run on the GPU
# machine: for 2 and 4 ranks on one GPU under MPS (this script starts its own daemon), gloo and DCCL's
# all_reduce_perf alternate ROUNDS times; each prints the slowest rank's time per float32-sum all-reduce at 8 B,
# 1 MiB, 16 MiB and 128 MiB; the table gives the medians over rounds and the ratio gloo time / DCCL time, and
# OUT_DIR/{gloo,dccl}.npN.median.json hold the medians in the perf tools' -J format (busbw = algbw x 2(N-1)/N), for
# perf/plot_busbw.py to draw gloo beside DCCL's paths.
# Usage: perf/gloo_vs_dccl.sh BUILD_DIR OUT_DIR [ROUNDS=3] [NPS="2 4"]
set -uo pipefail
build=$1
out=$2
rounds=${3:-3}
nps=${4:-2 4}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$out"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/dccl-gloo-mps CUDA_MPS_LOG_DIRECTORY=/tmp/dccl-gloo-mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d || { echo "gloo_vs_dccl: MPS did not start"; exit 1; }
trap 'echo quit | nvidia-cuda-mps-control' EXIT
# LD_LIBRARY_PATH travels where it is set (DCCL's libraries carried outside a build folder: scripts/gpu-carry.sh).
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x CUDA_MPS_PIPE_DIRECTORY -x PATH
     ${LD_LIBRARY_PATH:+-x LD_LIBRARY_PATH})
python=${PYTHON:-python3}
sizes="8 1048576 16777216 134217728"
status=0
for np in $nps; do
  for r in $(seq 1 "$rounds"); do
    timeout 300 "${mpi[@]}" -np "$np" "$python" "$here/gloo_allreduce.py" $((29500 + r)) $sizes \
      >> "$out/gloo.np$np.jsonl" 2> "$out/gloo.np$np.err" || { status=1; tail -5 "$out/gloo.np$np.err"; }
    for s in $sizes; do
      timeout 120 "${mpi[@]}" -np "$np" "$build/perf/all_reduce_perf" -b "$s" -e "$s" -c 1 -n 50 -w 5 \
        -J "$out/dccl.np$np.r$r.$s.json" > /dev/null 2>> "$out/dccl.np$np.err" || status=1
    done
  done
done
python3 - "$out" "$nps" <<'PY' || status=1
import glob, json, statistics, sys
out, nps = sys.argv[1], sys.argv[2].split()
print("| ranks | size | gloo (us) | DCCL (us) | gloo GB/s | DCCL GB/s | gloo/DCCL time |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
bad = 0
for np_ in nps:
    gloo = {}
    for line in open(f"{out}/gloo.np{np_}.jsonl"):
        row = json.loads(line)
        gloo.setdefault(row["size_bytes"], []).append(row["time_us"])
        bad += not row["check"]
    dccl = {}
    for f in glob.glob(f"{out}/dccl.np{np_}.r*.json"):
        for row in json.load(open(f))["rows"]:
            dccl.setdefault(row["size_bytes"], []).append(row["out_of_place"]["time_us"])
            bad += bool(row["out_of_place"]["wrong"])
    medians = {"gloo": [], "dccl": []}
    for size in sorted(gloo):
        g = statistics.median(gloo[size])
        d = statistics.median(dccl.get(size, [float("nan")]))
        print(f"| {np_} | {size} | {g:.1f} | {d:.1f} | {size / g / 1e3:.2f} | {size / d / 1e3:.1f} | {g / d:.0f}x |")
        medians["gloo"].append((size, g))
        medians["dccl"].append((size, d))
    n = int(np_)
    for lib, points in medians.items():  # the perf tools' -J shape, so plot_busbw.py draws it
        rows = [{"size_bytes": size, "type": "float32", "redop": "sum", "root": -1,
                 "out_of_place": {"time_us": us, "algbw_gbs": size / us / 1e3,
                                  "busbw_gbs": size / us / 1e3 * 2 * (n - 1) / n, "wrong": 0}}
                for size, us in points]
        with open(f"{out}/{lib}.np{np_}.median.json", "w") as f:
            json.dump({"tool": "gloo_vs_dccl", "nranks": n, "label": f"{lib}, {n} ranks (medians)",
                       "rows": rows}, f, indent=1)
print(f"checks: {'ok' if not bad else f'{bad} FAILED'}")
sys.exit(1 if bad else 0)
PY
exit $status
