#!/usr/bin/env python3
"""ctest perf.ab_report: perf/ab_report.py on lines shaped as scripts/gpu-lab-paths.sh's `ab` part prints them (two
libraries, three rounds, every kind of line): each library's median, the ratio of the last to the first, and the
all-reduce less the empty kernel and less the meeting kernels round by round, as the table prints them. Exit status 0
when all match."""
import os
import subprocess
import sys

# Per library, per round: empty+sync, ar+sync, ar b2b, ring 8 B, one-shot 8 B back to back and synchronised.
ROUNDS = {
    "base": [(9, 19, 10, 22, 9, 20), (8, 18.5, 11, 24, 11, 22), (10, 21, 9, 23, 10, 21)],
    "new": [(10, 18, 8, 21, 8, 19), (9, 17, 9, 20, 7, 18), (8, 16.5, 8.5, 25, 9, 20)],
}


def fixture():
    """The lines gpu-lab-paths.sh prints, rounds interleaved as it runs them, and one line that is not its."""
    lines = []
    for r in range(3):
        for lib, rounds in ROUNDS.items():
            empty, ar, b2b, ring, ob2b, osync = rounds[r]
            tag = f"ab.{lib}.%s.r{r + 1}:"
            lines += [f"{tag % 'mps'}   empty+sync {empty:10.2f} {empty:10.2f} 1.00",
                      f"{tag % 'mps'}   meet+sync {empty + 4:10.2f} {empty + 4:10.2f} 1.40",
                      f"{tag % 'mps'}   ar+sync {ar:10.2f} {ar:10.2f} 2.00",
                      f"{tag % 'mps'}   ar b2b {b2b:10.2f} {b2b:10.2f} 1.00",
                      f"{tag % 'ring'} 8 B {ring:.2f} us",
                      f"{tag % 'inproc-oneshot'} 8 B {ob2b:.2f} us back to back, {osync:.2f} us synchronised"
                      " after each",
                      f"{tag % 'floor4'}   wide meet b2b {ring / 2:10.2f} {ring / 2:10.2f} 1.00"]
    return "\n".join(lines + ["not an ab line: ignored", ""])


WANT = {  # case: (base median, new median, new / base)
    "mps empty+sync": ("9.00", "9.00", "1.000"),
    "mps ar+sync": ("19.00", "17.00", "0.895"),
    "mps ar b2b": ("10.00", "8.50", "0.850"),
    "ring 8 B": ("23.00", "21.00", "0.913"),
    "floor4 wide meet b2b": ("11.50", "10.50", "0.913"),  # a mode name of three words
    "inproc-oneshot 8 B b2b": ("10.00", "8.00", "0.800"),
    "inproc-oneshot 8 B sync": ("21.00", "19.00", "0.905"),
    # base: 10, 10.5, 11 -> 10.5; new: 8, 8, 8.5 -> 8
    "mps ar+sync - empty+sync (per round)": ("10.50", "8.00", "0.762"),
    # the meeting is the empty kernel + 4 in every round: 4 less
    "mps ar+sync - meet+sync (per round)": ("6.50", "4.00", "0.615"),
}


def main():
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ab_report.py")
    out = subprocess.run([sys.executable, script], input=fixture(), capture_output=True, text=True, check=True).stdout
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
