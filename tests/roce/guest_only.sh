#!/usr/bin/env bash
# Runs a roce_guest test's command, but only inside the soft-RoCE VM (scripts/roce-vm.sh sets DCCL_ROCE_VM=1).
# On the host such a test fails and says how to run it: passing there would claim RDMA was tested.
set -euo pipefail

if [[ ${DCCL_ROCE_VM:-} != 1 ]]; then
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  echo "roce_guest tests run only inside the soft-RoCE VM: from the build directory run" \
       "$repo/scripts/roce-vm.sh -- ctest -L roce_guest (or run ctest -R roce.vm_suite, which does that)" >&2
  exit 1
fi
exec "$@"
