#!/usr/bin/python3
# Usage: perf/nccl_vs_dccl_report.py OUT_DIR
#
# Reads the timed nccl-tests logs perf/nccl_vs_dccl.sh wrote (OUT_DIR/time.COLL.gG.rR.LIB.log, LIB nccl or dccl)
# and writes OUT_DIR/report.md: per collective and GPU count, the median over rounds of the out-of-place busbw at
# 256 MiB, 1 GiB and 8 GiB and of the time at 8 B, 1 KiB and 64 KiB, for NVIDIA's NCCL and DCCL, and DCCL/NCCL.
# Where a run's busbw is zero at every size (one rank: nothing crosses a link), its algbw stands in, marked.
# Draws OUT_DIR/busbw.png (busbw against size, a panel per collective at the largest GPU count) where matplotlib is
# installed. Prints the report.
import glob
import os
import re
import statistics
import sys

NAME = re.compile(r"time\.(\w+)\.g(\d+)\.r(\d+)\.(nccl|dccl)\.log$")
BUSBW_SIZES = [256 << 20, 1 << 30, 8 << 30]
TIME_SIZES = [8, 1024, 64 << 10]


def rows(path):
    """{size: (time_us, busbw, algbw)} from one nccl-tests log: the out-of-place columns of its data lines."""
    out = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            fields = line.split()
            if len(fields) < 8 or not fields[0].isdigit() or not fields[1].isdigit():
                continue
            try:
                out[int(fields[0])] = (float(fields[5]), float(fields[7]), float(fields[6]))
            except ValueError:
                continue
    return out


def size_label(size):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:g} {unit}"
        size /= 1024
    return str(size)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: nccl_vs_dccl_report.py OUT_DIR")
    out = sys.argv[1]
    runs = {}  # (coll, gpus, lib) -> {size: [(time, busbw, algbw), ...]}
    for path in glob.glob(os.path.join(out, "time.*.log")):
        m = NAME.search(os.path.basename(path))
        if not m:
            continue
        key = (m.group(1), int(m.group(2)), m.group(4))
        for size, tb in rows(path).items():
            runs.setdefault(key, {}).setdefault(size, []).append(tb)
    if not runs:
        sys.exit(f"nccl_vs_dccl_report: no timed logs in {out}")

    def median(coll, gpus, lib, size, idx):
        vals = runs.get((coll, gpus, lib), {}).get(size)
        return statistics.median(v[idx] for v in vals) if vals else None

    def cell(a, b, fmt):
        if a is None and b is None:
            return "-"
        text = " / ".join("-" if v is None else fmt.format(v) for v in (a, b))
        if a and b:
            text += f" ({b / a:.2f})"
        return text

    lines = ["| collective | GPUs | " + " | ".join(f"busbw {size_label(s)}" for s in BUSBW_SIZES) + " | " +
             " | ".join(f"time {size_label(s)}" for s in TIME_SIZES) + " |",
             "| --- | ---: |" + " --- |" * (len(BUSBW_SIZES) + len(TIME_SIZES))]
    def bw_index(coll, gpus):
        """1 (busbw), or 2 (algbw) where every busbw of the pair is zero."""
        vals = [v[1] for lib in ("nccl", "dccl") for vs in runs.get((coll, gpus, lib), {}).values() for v in vs]
        return 1 if any(vals) else 2

    for coll, gpus in sorted({(c, g) for c, g, _ in runs}):
        idx = bw_index(coll, gpus)
        mark = "" if idx == 1 else "algbw "
        cells = [cell(median(coll, gpus, "nccl", s, idx), median(coll, gpus, "dccl", s, idx), "{:.1f}")
                 for s in BUSBW_SIZES]
        cells = [c if c == "-" else mark + c for c in cells]
        cells += [cell(median(coll, gpus, "nccl", s, 0), median(coll, gpus, "dccl", s, 0), "{:.1f}")
                  for s in TIME_SIZES]
        lines.append(f"| {coll} | {gpus} | " + " | ".join(cells) + " |")
    report = ("NCCL / DCCL, medians over rounds (busbw in GB/s, or algbw where marked, time in us; "
              "DCCL/NCCL in brackets)\n\n" +
              "\n".join(lines) + "\n")
    with open(os.path.join(out, "report.md"), "w", encoding="utf-8") as f:
        f.write(report)
    print(report)

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(no matplotlib: no plot)")
        return
    most = max(g for _, g, _ in runs)
    colls = sorted({c for c, g, _ in runs if g == most})
    fig, axes = plt.subplots(1, len(colls), figsize=(5 * len(colls), 4), squeeze=False)
    for ax, coll in zip(axes[0], colls):
        for lib, style in (("nccl", "-"), ("dccl", "--")):
            data = runs.get((coll, most, lib))
            if not data:
                continue
            sizes = sorted(data)
            idx = bw_index(coll, most)
            ax.plot(sizes, [statistics.median(v[idx] for v in data[s]) for s in sizes], style,
                    label="NVIDIA NCCL" if lib == "nccl" else "DCCL")
        ax.set_xscale("log", base=2)
        ax.set_title(f"{coll}, {most} GPU{'s' if most > 1 else ''}")
        ax.set_xlabel("bytes")
        ax.set_ylabel(("busbw" if idx == 1 else "algbw") + " (GB/s)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "busbw.png"), dpi=100)
    print(f"plot: {os.path.join(out, 'busbw.png')}")


if __name__ == "__main__":
    main()
