#!/usr/bin/env python3
"""Medians of the gpu-lab `knob` part (scripts/gpu-lab-paths.sh): one column per setting, one row per mode of
dev_latency (2 ranks in processes under MPS) and of inproc_allreduce (2 ranks of one process, `ip-default` and
`ip-oneshot`), each cell the median over the rounds with the rounds after it, in us.
Usage: perf/knob_report.py PATHS_OUTPUT (the text gpu-lab.sh printed, or the part's log)"""
import collections
import re
import statistics
import sys

LATENCY = re.compile(r"knob\.(\S+)\.r(\d+): +(\S+(?: \S+)?) +([\d.]+) +([\d.]+) +([\d.]+)$")
INPROC = re.compile(r"knob\.(\S+)\.r(\d+) inproc (\w+) \d+ B: (.*) us$")


def read(lines):
    cells = collections.defaultdict(lambda: collections.defaultdict(list))
    for line in lines:
        line = line.rstrip()
        m = LATENCY.match(line)
        if m:
            cells[m.group(1)][m.group(3)].append(float(m.group(4)))
            continue
        m = INPROC.match(line)
        if m:
            for part in m.group(4).split(", "):
                mode, value = part.rsplit(" ", 1)
                cells[m.group(1)]["ip-%s %s" % (m.group(3), mode)].append(float(value))
    return cells


def main():
    cells = read(open(sys.argv[1]))
    if not cells:
        sys.exit("knob_report: no knob lines in " + sys.argv[1])
    settings = list(cells)
    modes = list(dict.fromkeys(m for s in settings for m in cells[s]))
    print("| mode | " + " | ".join(settings) + " |")
    print("| --- |" + " ---: |" * len(settings))
    for mode in modes:
        row = []
        for s in settings:
            v = cells[s].get(mode, [])
            row.append("%.2f (%s)" % (statistics.median(v), " ".join("%.2f" % x for x in v)) if v else "-")
        print("| %s | %s |" % (mode, " | ".join(row)))


if __name__ == "__main__":
    main()
