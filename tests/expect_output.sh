#!/usr/bin/env bash
# Runs a command and passes only when it exits 0 and its output (stdout and stderr) matches an extended regular
# expression. ctest's PASS_REGULAR_EXPRESSION ignores the exit code, so a rank that crashes after printing the
# expected line would pass there; this checks both.
# Usage: expect_output.sh REGEX COMMAND [ARGS...]
set -uo pipefail

if (($# < 2)); then
  echo "usage: $0 REGEX COMMAND [ARGS...]" >&2
  exit 2
fi
regex=$1
shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT

"$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
# 77: the command could not run here (no GPU): a skip, not a pass, as ctest's SKIP_RETURN_CODE counts it.
((rc == 77)) && exit 77
if ((rc != 0)); then
  echo "expect_output: FAIL: the command exited with status $rc" >&2
  exit 1
fi
if ! grep -Eq -- "$regex" "$log"; then
  echo "expect_output: FAIL: the output has no line matching: $regex" >&2
  exit 1
fi
echo "expect_output: the command exited 0 and its output matched: $regex"
