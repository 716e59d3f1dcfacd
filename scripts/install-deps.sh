#!/usr/bin/env bash
# Installs what DCCL needs to build and test on Debian 12 (as root, or with sudo). Packages already installed
# are skipped, so a prepared machine makes no network access at all.
set -euo pipefail

packages=(build-essential cmake ninja-build pkg-config libopenmpi-dev openmpi-bin libhwloc-dev libibverbs-dev
          librdmacm-dev)
# The soft-RoCE VM (scripts/roce-vm.sh): qemu, the initramfs userland and packer, module tools, and the RDMA tools
# that the guest runs from the host's filesystem.
packages+=(qemu-system-x86 busybox-static kmod cpio iproute2 rdma-core ibverbs-utils rdmacm-utils)
# The bus-bandwidth plots of the perf tools' JSON (perf/plot_busbw.py).
packages+=(python3-matplotlib)

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
  echo "install-deps: all build and test dependencies are installed"
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
