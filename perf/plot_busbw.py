#!/usr/bin/python3
# Usage: perf/plot_busbw.py [-o busbw.png] [--label TEXT]... [--in-place] [--title TEXT] [--log-y] RUN.json [RUN.json...]
#
# Plots bus bandwidth (GB/s) against size from the JSON files the perf tools write with -J: one line per file
# (labelled by the file's "label", e.g. "dccl DCCL_ALGO=ring", or by --label), and the file's MPI baseline, when
# it was run with -M 1, as a dashed line of its own. Needs only Debian's python3-matplotlib, hence the system
# interpreter in the first line (a python3 earlier in PATH, e.g. pyenv's, may not have matplotlib).
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")  # files only: no display on build machines
import matplotlib.pyplot as plt  # noqa: E402 (must follow the backend choice)


def size_label(size):
    """8 -> '8 B', 65536 -> '64 KiB', 67108864 -> '64 MiB'."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:g} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def load_run(path):
    with open(path, encoding="utf-8") as f:
        run = json.load(f)
    if not isinstance(run, dict) or "rows" not in run:
        sys.exit(f"plot_busbw: {path} is not a perf tool -J file (an object with \"rows\")")
    return run


def series(run, in_place):
    """{(type, redop, root): ([sizes], [dccl busbw], [(size, mpi busbw)])} for the rows of nonzero size."""
    result_key = "in_place" if in_place else "out_of_place"
    groups = {}
    for row in sorted(run["rows"], key=lambda r: r["size_bytes"]):
        if row["size_bytes"] == 0:  # no place on a log axis
            continue
        key = (row["type"], row["redop"], row["root"])
        sizes, busbw, mpi = groups.setdefault(key, ([], [], []))
        sizes.append(row["size_bytes"])
        busbw.append(row[result_key]["busbw_gbs"])
        if row.get("mpi"):
            mpi.append((row["size_bytes"], row["mpi"]["busbw_gbs"]))
    return groups


def group_suffix(key, many):
    """Names the type, op and root only when a file holds more than one combination of them."""
    if not many:
        return ""
    type_name, redop, root = key
    parts = [type_name] + ([redop] if redop != "none" else []) + ([f"root {root}"] if root >= 0 else [])
    return " (" + " ".join(parts) + ")"


def default_title(runs, in_place):
    first = runs[0]
    place = "in-place" if in_place else "out-of-place"
    title = f"{first.get('tool', 'perf')}: bus bandwidth, {first.get('nranks', '?')} ranks, {place}"
    date = first.get("date", "")[:10]
    return f"{title}, {date}" if date else title


def plot(runs, labels, in_place, title, out_path, log_y=False):
    fig, ax = plt.subplots(figsize=(9, 5.2), dpi=100)
    all_sizes = set()
    for run, label in zip(runs, labels):
        groups = series(run, in_place)
        mpi_name = run.get("mpi_library") or "mpi"
        for key, (sizes, busbw, mpi) in groups.items():
            suffix = group_suffix(key, len(groups) > 1)
            all_sizes.update(sizes)
            ax.plot(sizes, busbw, marker="o", markersize=3, label=label + suffix)
            if mpi:
                mpi_label = mpi_name + suffix + (f" (run of {label})" if len(runs) > 1 else "")
                ax.plot([s for s, _ in mpi], [b for _, b in mpi], marker="s", markersize=3, linestyle="--",
                        label=mpi_label)
    if not all_sizes:
        sys.exit("plot_busbw: no rows of nonzero size to plot")
    ax.set_xscale("log", base=2)
    ticks = []
    tick = 1
    while tick <= max(all_sizes):
        if tick >= min(all_sizes):
            ticks.append(tick)
        tick *= 2
    ax.set_xticks(ticks)
    ax.set_xticklabels([size_label(t) for t in ticks], rotation=45, ha="right", fontsize=8)
    ax.minorticks_off()
    ax.set_xlabel("size")
    ax.set_ylabel("bus bandwidth (GB/s)")
    if log_y:  # paths 100x apart (host-staged, gloo) stay readable beside the direct ones
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title or default_title(runs, in_place), fontsize=10)
    fig.tight_layout()
    fig.savefig(out_path)


def main():
    parser = argparse.ArgumentParser(
        description="Plot bus bandwidth against size from perf tool -J files (one line per file, plus its MPI "
        "baseline when it has one).")
    parser.add_argument("files", nargs="+", metavar="RUN.json", help="JSON written by a *_perf tool with -J")
    parser.add_argument("-o", "--output", default="busbw.png", help="the PNG to write (default busbw.png)")
    parser.add_argument("--label", action="append", default=[],
                        help="the line's name, once per file in order (default: the file's label)")
    parser.add_argument("--in-place", action="store_true", help="plot the in-place results (default out-of-place)")
    parser.add_argument("--title", help="the plot's title (default: tool, ranks, date)")
    parser.add_argument("--log-y", action="store_true", help="bus bandwidth on a logarithmic axis")
    args = parser.parse_args()
    if args.label and len(args.label) != len(args.files):
        parser.error(f"{len(args.label)} --label for {len(args.files)} files: give one per file or none")
    runs = [load_run(path) for path in args.files]
    labels = args.label or [run.get("label", "dccl") for run in runs]
    plot(runs, labels, args.in_place, args.title, args.output, args.log_y)


if __name__ == "__main__":
    main()
