#!/usr/bin/env python3
"""ctest perf.ab_report: perf/ab_report.py on lines shaped as scripts/gpu-lab-paths.sh's `ab` part prints them (two
libraries, three rounds, every kind of line): each library's median, the ratio of the last to the first, and the
all-reduce less the empty kernel round by round, as the table prints them. Exit status 0 when all match."""
import os
import subprocess
import sys

LINES = """
ab.base.mps.r1:   empty+sync         9.00       9.00       1.00
ab.base.mps.r1:   ar+sync           19.00      19.00       2.11
ab.base.mps.r1:   ar b2b            10.00      10.00       1.11
ab.new.mps.r1:   empty+sync        10.00      10.00       1.00
ab.new.mps.r1:   ar+sync           18.00      18.00       1.80
ab.new.mps.r1:   ar b2b             8.00       8.00       0.80
ab.base.ring.r1: 8 B 22.00 us
ab.new.ring.r1: 8 B 21.00 us
ab.base.inproc-oneshot.r1: 8 B 9.00 us back to back, 20.00 us synchronised after each
ab.new.inproc-oneshot.r1: 8 B 8.00 us back to back, 19.00 us synchronised after each
ab.base.mps.r2:   empty+sync         8.00       8.00       1.00
ab.base.mps.r2:   ar+sync           18.50      18.50       2.31
ab.base.mps.r2:   ar b2b            11.00      11.00       1.38
ab.new.mps.r2:   empty+sync         9.00       9.00       1.00
ab.new.mps.r2:   ar+sync           17.00      17.00       1.89
ab.new.mps.r2:   ar b2b             9.00       9.00       1.00
ab.base.ring.r2: 8 B 24.00 us
ab.new.ring.r2: 8 B 20.00 us
ab.base.inproc-oneshot.r2: 8 B 11.00 us back to back, 22.00 us synchronised after each
ab.new.inproc-oneshot.r2: 8 B 7.00 us back to back, 18.00 us synchronised after each
ab.base.mps.r3:   empty+sync        10.00      10.00       1.00
ab.base.mps.r3:   ar+sync           21.00      21.00       2.10
ab.base.mps.r3:   ar b2b             9.00       9.00       0.90
ab.new.mps.r3:   empty+sync         8.00       8.00       1.00
ab.new.mps.r3:   ar+sync           16.50      16.50       2.06
ab.new.mps.r3:   ar b2b             8.50       8.50       1.06
ab.base.ring.r3: 8 B 23.00 us
ab.new.ring.r3: 8 B 25.00 us
ab.base.inproc-oneshot.r3: 8 B 10.00 us back to back, 21.00 us synchronised after each
ab.new.inproc-oneshot.r3: 8 B 9.00 us back to back, 20.00 us synchronised after each
not an ab line: ignored
"""

WANT = {  # case: (base median, new median, new / base)
    "mps empty+sync": ("9.00", "9.00", "1.000"),
    "mps ar+sync": ("19.00", "17.00", "0.895"),
    "mps ar b2b": ("10.00", "8.50", "0.850"),
    "ring 8 B": ("23.00", "21.00", "0.913"),
    "inproc-oneshot 8 B b2b": ("10.00", "8.00", "0.800"),
    "inproc-oneshot 8 B sync": ("21.00", "19.00", "0.905"),
    # base: 10, 10.5, 11 -> 10.5; new: 8, 8, 8.5 -> 8
    "mps ar+sync - empty+sync (per round)": ("10.50", "8.00", "0.762"),
}


def main():
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ab_report.py")
    out = subprocess.run([sys.executable, script], input=LINES, capture_output=True, text=True, check=True).stdout
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4:
            rows[cells[0]] = tuple(cells[1:])
    failed = 0
    if rows.get("case (us, median)", ("",))[0:2] != ("base", "new"):
        print(f"FAIL: the header names the libraries in order: {rows.get('case (us, median)')}")
        failed += 1
    for case, want in WANT.items():
        if rows.get(case) != want:
            print(f"FAIL: {case}: got {rows.get(case)}, want {want}")
            failed += 1
    empty = subprocess.run([sys.executable, script], input="nothing\n", capture_output=True, text=True)
    if empty.returncode == 0:
        print("FAIL: no ab lines must be an error")
        failed += 1
    print(f"ab_report_test: {len(WANT) + 2 - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
