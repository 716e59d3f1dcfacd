#!/usr/bin/env bash
# The guest side of roce.vm_suite: every roce_guest test of the build directory (the cwd), inside the VM.
# The host's ctest is writing Testing/Temporary/*.log in this same directory while it waits for us, so the
# guest's ctest keeps its own Testing/ in guest memory, where neither overwrites the other's logs.
set -euo pipefail

mkdir -p Testing
mount -t tmpfs guest-testing Testing
exec ctest --output-on-failure --no-tests=error -L roce_guest
