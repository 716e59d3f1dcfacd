#!/usr/bin/env python3
"""Lists every ctest case that could pass without checking anything, and fails if there is one.

A case passes by accident when ctest ignores its exit code (PASS_REGULAR_EXPRESSION, WILL_FAIL), when its
program only looks at files (`test -x`, `ls`, `cmake -E ...`), when it was never built (no command), or when it
runs a shell script that carries on past a failing command (no `set -e`, and the script does not end by
exec'ing the real test). Wrappers that hand their status through (env, mpiexec, the project's own wrappers) are
looked through, so the program they run is judged.

Usage: check_tests_assert.py BUILD_DIR   (reads `ctest --show-only=json-v1` there)
"""
import json
import os
import re
import subprocess
import sys

# Programs that succeed whatever the code under test does.
NO_ASSERT_PROGRAMS = {"test", "[", "true", ":", "ls", "echo", "printf", "cat", "stat", "touch", "cmake"}
# Launchers that run the rest of the line and return its status, with the options that take a value.
MPI_LAUNCHERS = {"mpiexec", "mpirun"}
MPI_OPTIONS_WITH_VALUE = {"-np", "-n", "--np", "--bind-to", "--map-by", "--rank-by", "-x", "--host", "-H",
                          "--hostfile", "--report-bindings-file"}
MPI_OPTIONS_WITH_TWO_VALUES = {"--mca", "-mca"}
SHELLS = {"sh", "bash", "dash"}


def is_script(path):
    """A shell script: named .sh, or its #! line names a shell (a Python test is judged as a program: it fails by
    its exit status, and an uncaught exception exits nonzero)."""
    try:
        with open(path, "rb") as f:
            first = f.readline(200)
    except OSError:
        return False
    if path.endswith(".sh"):
        return True
    if not first.startswith(b"#!"):
        return False
    words = first[2:].decode(errors="replace").split()
    interpreter = os.path.basename(words[1] if words and os.path.basename(words[0]) == "env" and len(words) > 1
                                   else words[0] if words else "")
    return interpreter in SHELLS


def script_stops_on_failure(path):
    """True if the script exits on a failing command, or its last command is an exec of its arguments."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = [l.strip() for l in f if l.strip() and not l.strip().startswith("#")]
    if any(re.match(r"set\s+-[a-z]*e", l) or re.match(r"set\s+-o\s+errexit", l) for l in lines):
        return True
    return bool(lines) and lines[-1].startswith("exec ")


def script_execs_its_arguments(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return any(re.match(r'\s*exec\s+"\$@"', l) for l in f)


def judge(command, props):
    """Returns the reason this case could pass without checking anything, or None."""
    if not command:
        return "no command (its program was not built)"
    if props.get("WILL_FAIL"):
        return "WILL_FAIL: any failure passes"
    if props.get("PASS_REGULAR_EXPRESSION"):
        return "PASS_REGULAR_EXPRESSION ignores the exit code (use tests/expect_output.sh)"
    args = list(command)
    while args:
        prog = args[0]
        name = os.path.basename(prog)
        if name == "env":
            args = args[1:]
            while args and (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", args[0]) or args[0].startswith("-")):
                args = args[1:]
            continue
        if name in MPI_LAUNCHERS:
            args = args[1:]
            while args and args[0].startswith("-"):
                skip = 3 if args[0] in MPI_OPTIONS_WITH_TWO_VALUES else 2 if args[0] in MPI_OPTIONS_WITH_VALUE else 1
                args = args[skip:]
            continue
        if name in SHELLS:
            args = args[1:]
            continue
        if name in NO_ASSERT_PROGRAMS:
            return f"`{name}` checks nothing the test names"
        if name == "expect_output.sh":
            args = args[2:]  # REGEX, then the command whose status it also checks
            continue
        if is_script(prog):
            if not script_stops_on_failure(prog):
                return f"{name} carries on past a failing command (no `set -e`, no final exec)"
            if script_execs_its_arguments(prog):
                args = args[1:]  # a wrapper: judge what it runs
                while args and args[0].startswith("-"):
                    args = args[1:]
                continue
            return None
        if not os.access(prog, os.X_OK):
            return f"{prog} is not an executable file"
        return None
    return "the command is only wrappers, with nothing inside"


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=sys.argv[1], check=True, capture_output=True,
                         text=True).stdout
    tests = json.loads(out)["tests"]
    bad = []
    for t in tests:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        reason = judge(t.get("command", []), props)
        if reason:
            bad.append((t["name"], reason))
    for name, reason in bad:
        print(f"could pass without checking anything: {name}: {reason}")
    print(f"check_tests_assert: {len(tests)} ctest cases, {len(bad)} could pass without checking anything")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
