#!/usr/bin/env bash
# Runs a command under an MPS control daemon of its own (its own pipe and log directories), stopping the daemon
# when it ends, or with --off where no daemon is (an empty pipe directory: the clients find none, so each process
# gets its own context); exits with the command's status. Exits 77 (skipped) where there is no GPU or no MPS.
# Usage: with_mps.sh [--off] COMMAND [ARGS...]
set -euo pipefail
nvidia-smi -L > /dev/null 2>&1 || { echo "SKIP: no GPU"; exit 77; }
dir=$(mktemp -d /tmp/dccl-mps.XXXXXX)
export CUDA_MPS_PIPE_DIRECTORY=$dir/pipe CUDA_MPS_LOG_DIRECTORY=$dir/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if [ "${1:-}" = --off ]; then
  shift
  trap 'rm -rf "$dir"' EXIT
  "$@"
  exit
fi
mps=$(command -v nvidia-cuda-mps-control || echo /usr/local/nvidia/bin/nvidia-cuda-mps-control)
[ -x "$mps" ] || { echo "SKIP: no nvidia-cuda-mps-control"; exit 77; }
stop() {
  echo quit | "$mps" > /dev/null 2>&1 || true
  # The daemon exits once its clients have: give it a moment, so the next test does not start beside it.
  for _ in $(seq 50); do pgrep -f "nvidia-cuda-mps-control -d" > /dev/null || break; sleep 0.1; done
  rm -rf "$dir"
}
"$mps" -d
trap stop EXIT
"$@"
