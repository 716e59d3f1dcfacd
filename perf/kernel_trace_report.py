#!/usr/bin/env python3
"""Where a small operation's time goes, from perf/gpu/kernel_trace.c's records (trace.PID.tsv in a folder).

Every stream of every process that ran kernels whose name holds PATTERN is a lane (a rank). The last N eager kernels
of each lane are lined up by index (the k-th kernel of every lane is the same collective), and the medians printed:
  period        one kernel's start to the next one's on the lane (the whole cost per operation)
  launch call   the host's launch call (cuLaunchKernel or cudaLaunchKernel), start to return
  call->queued  the call's start to the kernel's queued time (the library's own work before it launches is before
                the call, in `host gap`)
  queued->start the kernel's wait between being queued and starting on the GPU
  duration      the kernel's start to end
  after peers   the kernel's end less the latest start among the lanes' k-th kernels (the time the collective
                itself took once every rank's kernel ran; only with several lanes)
  start skew    the latest start less the earliest among the lanes' k-th kernels
  sync wake     the end of the synchronise call that was waiting as the kernel ended, less the kernel's end
  host gap      the end of that synchronise to the next launch call's start (the caller's and the library's host
                work between operations)
Usage: kernel_trace_report.py DIR [--pattern dccl_kernel] [--last 2000]
"""
import argparse
import bisect
import glob
import os
import statistics
import sys


def read_trace(path):
    kernels, apis = [], []
    with open(path) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if p[0] == "K" and len(p) >= 9:
                kernels.append({"stream": int(p[1]), "corr": int(p[2]), "graph": int(p[3]), "queued": int(p[4]),
                                "submitted": int(p[5]), "start": int(p[6]), "end": int(p[7]), "name": p[8]})
            elif p[0] == "A" and len(p) >= 7:
                apis.append({"name": p[2], "corr": int(p[3]), "start": int(p[4]), "end": int(p[5])})
    return kernels, apis


def lanes_of(folder, pattern, last):
    """{(file, stream): [kernel, ...]} for eager kernels matching pattern, each with its launch call and sync."""
    lanes = {}
    for path in sorted(glob.glob(os.path.join(folder, "trace.*.tsv"))):
        kernels, apis = read_trace(path)
        launches = {}
        for a in apis:
            if "Launch" in a["name"] and "Graph" not in a["name"]:
                launches.setdefault(a["corr"], a)  # the first record of the correlation id
        syncs = sorted((a for a in apis if "Synchronize" in a["name"]), key=lambda a: a["start"])
        sync_starts = [s["start"] for s in syncs]
        # A kernel whose launch call was not recorded (a driver entry point CUPTI did not see) still counts for
        # the GPU-side figures.
        mine = [k for k in kernels if pattern in k["name"] and k["graph"] == 0]
        for k in mine:
            k["call"] = launches.get(k["corr"])
            i = bisect.bisect_right(sync_starts, k["end"]) - 1  # the last synchronise begun before the kernel ended
            k["sync"] = syncs[i] if i >= 0 and syncs[i]["end"] >= k["end"] else None
        by_stream = {}
        for k in mine:
            by_stream.setdefault(k["stream"], []).append(k)
        for stream, ks in by_stream.items():
            ks.sort(key=lambda k: k["start"])
            lanes[(os.path.basename(path), stream)] = ks[-last:]
    return lanes


def median_us(values):
    return statistics.median(values) / 1000.0 if values else float("nan")


def report(lanes):
    # A stream with a handful of kernels (the program's warm-up or check on a stream of its own) is no rank's lane.
    most = max(len(ks) for ks in lanes.values())
    lanes = {key: ks for key, ks in lanes.items() if len(ks) * 2 >= most}
    n = min(len(ks) for ks in lanes.values())
    rows = {name: [] for name in ("period", "launch call", "call->queued", "queued->start", "duration",
                                  "after peers", "start skew", "sync wake", "host gap")}
    for ks in lanes.values():
        ks = ks[-n:]
        for i, k in enumerate(ks):
            call, prev = k["call"], ks[i - 1] if i > 0 else None
            if prev:
                rows["period"].append(k["start"] - prev["start"])
                if call and prev["sync"] and prev["sync"]["end"] <= call["start"]:
                    rows["host gap"].append(call["start"] - prev["sync"]["end"])
            if call:
                rows["launch call"].append(call["end"] - call["start"])
            if k["queued"]:
                if call:
                    rows["call->queued"].append(k["queued"] - call["start"])
                rows["queued->start"].append(k["start"] - k["queued"])
            rows["duration"].append(k["end"] - k["start"])
            if k["sync"]:
                rows["sync wake"].append(k["sync"]["end"] - k["end"])
    if len(lanes) > 1:
        aligned = [ks[-n:] for ks in lanes.values()]
        for i in range(n):
            starts = [ks[i]["start"] for ks in aligned]
            rows["start skew"].append(max(starts) - min(starts))
            for ks in aligned:
                rows["after peers"].append(ks[i]["end"] - max(starts))
    calls = sum(1 for ks in lanes.values() for k in ks[-n:] if k["call"])
    print("# %d lanes (process, stream), %d kernels each, %d with their launch call; medians in us"
          % (len(lanes), n, calls))
    for name, values in rows.items():
        if values:
            print("  %-14s %8.2f" % (name, median_us(values)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--pattern", default="dccl_kernel")
    ap.add_argument("--last", type=int, default=2000)
    args = ap.parse_args()
    lanes = lanes_of(args.folder, args.pattern, args.last)
    if not lanes:
        print("kernel_trace_report: no eager kernel named like %r in %s" % (args.pattern, args.folder))
        return 1
    report(lanes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
