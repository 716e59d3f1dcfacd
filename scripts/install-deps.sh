#!/usr/bin/env bash
# Installs what DCCL needs to build and test on Debian 12 (as root, or with sudo). Packages already installed
# are skipped, so a prepared machine makes no network access at all.
#
# Usage: scripts/install-deps.sh [build|all]
#   build  compiler, cmake, ninja, pkg-config, Open MPI, hwloc, libibverbs and librdmacm headers, python3 and
#          matplotlib: enough to build everything, run the perf tools and plot them, and run the host tests
#          (scripts/run-perf.sh uses this)
#   all    (default) build plus the soft-RoCE VM's packages (qemu, ...) that the full test run needs
#          (scripts/run-tests.sh uses this)
set -euo pipefail

profile=${1:-all}
case $profile in
  build|all) ;;
  *) echo "usage: $0 [build|all]" >&2; exit 2 ;;
esac

packages=(build-essential cmake ninja-build pkg-config libopenmpi-dev openmpi-bin libhwloc-dev libibverbs-dev
          librdmacm-dev)
# Python runs the test-suite lints (tests/check_*.py; configuring the tests needs it) and the bus-bandwidth plots
# of the perf tools' JSON (perf/plot_busbw.py).
packages+=(python3 python3-matplotlib)
# The soft-RoCE VM (scripts/roce-vm.sh): qemu, the initramfs userland and packer, module tools, and the RDMA tools
# that the guest runs from the host's filesystem.
if [[ $profile == all ]]; then
  packages+=(qemu-system-x86 busybox-static kmod cpio iproute2 rdma-core ibverbs-utils rdmacm-utils)
fi

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: not a Debian-style system (no dpkg/apt-get); install these yourself: ${packages[*]}" >&2
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all dependencies ($profile) are installed"
  exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  sudo=(sudo)
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update
"${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
