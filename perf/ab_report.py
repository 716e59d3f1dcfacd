#!/usr/bin/env python3
"""The medians of scripts/gpu-lab-paths.sh's `ab` part: reads its printed lines (`ab.LIB.CASE.rN: ...`) on stdin
and prints one markdown row per case and figure, each library's median over the rounds in the order they first
appear, and the last library's over the first's (the last is the build under test, the first its base); and the
all-reduce with a synchronise less the empty kernel with one, round by round (the kernel's own part), and less the
kernels that only meet (what the all-reduce costs beyond the least any collective between the processes costs).
Usage: ... | python3 perf/ab_report.py"""
import re
import statistics
import sys

LINE = re.compile(r"^ab\.(?P<lib>[^.]+)\.(?P<case>[^:]+)\.r\d+:\s*(?P<rest>.*)$")


def figures(case, rest):
    """(label, value in us) pairs of one printed line."""
    m = re.match(r"(.+?)\s+([\d.]+)", rest)  # dev_latency: mode, then its time
    if case in ("mps", "floor4") and m:
        return [(f"{case} {m.group(1)}", float(m.group(2)))]
    m = re.match(r"(\d+) B ([\d.]+) us back to back, ([\d.]+) us synchronised", rest)
    if m:
        return [(f"{case} {m.group(1)} B b2b", float(m.group(2))), (f"{case} {m.group(1)} B sync", float(m.group(3)))]
    m = re.match(r"(\d+) B ([\d.]+) us", rest)
    if m:
        return [(f"{case} {m.group(1)} B", float(m.group(2)))]
    return []


def main():
    libs, rows = [], {}
    for line in sys.stdin:
        m = LINE.match(line.strip())
        if not m:
            continue
        lib = m.group("lib")
        if lib not in libs:
            libs.append(lib)
        for label, value in figures(m.group("case"), m.group("rest")):
            rows.setdefault(label, {}).setdefault(lib, []).append(value)
    if not libs:
        sys.exit("ab_report: no ab lines on stdin")
    # The kernel's part: each round's all-reduce over the same run's empty kernel (both with a synchronise), which
    # cancels the launch and wake-up costs that swing between machines and minutes.
    ar = rows.get("mps ar+sync", {})
    for floor in ("empty+sync", "meet+sync"):
        base = rows.get(f"mps {floor}", {})
        for lib in libs:
            if lib in ar and lib in base:
                over = [a - e for a, e in zip(ar[lib], base[lib])]
                rows.setdefault(f"mps ar+sync - {floor} (per round)", {})[lib] = over
    print("| case (us, median) | " + " | ".join(libs) + f" | {libs[-1]} / {libs[0]} |")
    print("| --- |" + " ---: |" * (len(libs) + 1))
    for label, by_lib in rows.items():
        med = [statistics.median(by_lib[l]) if l in by_lib else None for l in libs]
        cells = [f"{v:.2f}" if v is not None else "-" for v in med]
        ratio = f"{med[-1] / med[0]:.3f}" if med[0] and med[-1] else "-"
        print(f"| {label} | " + " | ".join(cells) + f" | {ratio} |")


if __name__ == "__main__":
    main()
