#!/usr/bin/env bash
# Runs a command and records which libnccl.so files its process maps (from /proc/PID/maps, read while it runs),
# appending "PID: PATH" lines to RECORD (one per file; "PID: none" if it maps none before it exits). Exits with the
# command's status. Under mpirun each rank runs its own copy: one line per rank.
# Usage: maps_proof.sh RECORD COMMAND [ARGS...]
set -euo pipefail
record=$1
shift
"$@" &
pid=$!
found=
while kill -0 "$pid" 2> /dev/null; do
  found=$(grep -o '/[^ ]*libnccl\.so[.0-9]*$' "/proc/$pid/maps" 2> /dev/null | sort -u || true)
  [ -n "$found" ] && break
  sleep 0.02
done
if [ -n "$found" ]; then
  while read -r path; do echo "$pid: $(readlink -f "$path")" >> "$record"; done <<< "$found"
else
  echo "$pid: none" >> "$record"
fi
wait "$pid"
