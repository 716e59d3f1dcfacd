#!/usr/bin/env bash
# Runs one command inside a small VM that has real RDMA: Debian's stock kernel with the soft-RoCE driver
# (rdma_rxe) on a veth pair, booted under qemu (TCG: these machines have neither KVM nor an RDMA-capable kernel).
# The guest sees the host's whole filesystem read-only and chroots into it, so the command runs with the same
# paths and programs as on the host. See docs/testing.md and ../shared/docs/roce-lab.md (the recipe).
#
# Usage: scripts/roce-vm.sh [--timeout S] [--mem MiB] [--writable DIR]... -- COMMAND [ARGS...]
#   --timeout S     qemu is killed after S seconds, boot included (default 600)
#   --mem MiB       guest memory (default 4096: 4 ranks with MiB-sized buffers, /tmp and /dev/shm are in it)
#   --writable DIR  DIR is writable inside the guest (repeatable; default: the build directory, $BUILD_DIR or
#                   ./build of this repository, if it exists)
# In the guest: root, cwd = the caller's cwd, DCCL_ROCE_VM=1, `ulimit -l unlimited`, hostname roce0, device
# rxe0 on netdev v0 (10.9.0.1/24). PATH and the caller's DCCL_* and NCCL_* variables are passed on.
# Exit status: the command's; 124 if the timeout hit; 125 if the VM could not be prepared, booted or set up
# (the last line on stderr says why).
# Environment: DCCL_ROCE_CACHE (kernel cache, default ~/.cache/dccl-roce), DCCL_ROCE_KERNEL (kernel version,
# e.g. 6.1.0-57-amd64; default: the one Debian's linux-image-amd64 depends on).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${DCCL_ROCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dccl-roce}
# In load order; crc32_generic first, or rdma_rxe fails to init its crc32 algorithm.
modules=(crc32_generic virtio_pci 9pnet_virtio 9p veth rdma_rxe ib_uverbs rdma_ucm)

timeout_s=600
mem_mib=4096
writable=()
command=()
cleanup=()  # folders removed on exit

die() {
  echo "roce-vm: $*" >&2
  exit 125
}

usage() {
  sed -n '6,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 125
}

parse_args() {
  while (($# > 0)); do
    case $1 in
      --timeout) timeout_s=${2:?--timeout needs seconds}; shift 2 ;;
      --mem) mem_mib=${2:?--mem needs MiB}; shift 2 ;;
      --writable) writable+=("$(cd "${2:?--writable needs a directory}" && pwd)"); shift 2 ;;
      --) shift; command=("$@"); break ;;
      *) usage ;;
    esac
  done
  ((${#command[@]} > 0)) || usage
  if ((${#writable[@]} == 0)) && [[ -d ${BUILD_DIR:-$repo/build} ]]; then
    writable=("$(cd "${BUILD_DIR:-$repo/build}" && pwd)")
  fi
}

check_tools() {
  local tool
  for tool in qemu-system-x86_64 busybox cpio depmod modprobe dpkg apt-get apt-cache flock timeout; do
    command -v "$tool" >/dev/null || die "$tool not found (run scripts/install-deps.sh)"
  done
  # The initramfs has no libc: its busybox must be the static one.
  if ldd "$(command -v busybox)" >/dev/null 2>&1; then
    die "busybox is dynamically linked (install busybox-static)"
  fi
}

# The guest mounts its own tmpfs over /tmp and /dev/shm, hiding whatever the host has there; folders of ours under
# /tmp (a clone made there) are bound back into it, /dev/shm ones are refused.
check_paths() {
  local dir
  for dir in "$PWD" "$repo" "${writable[@]}"; do
    case $dir/ in
      /dev/shm/*) die "$dir is under /dev/shm, which the guest has as its own empty tmpfs" ;;
    esac
  done
}

# The kernel to boot: the plain -amd64 flavour (the -cloud one has no rdma_rxe).
kernel_version() {
  if [[ -n ${DCCL_ROCE_KERNEL:-} ]]; then
    echo "$DCCL_ROCE_KERNEL"
    return
  fi
  local dep
  dep=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: linux-image-\(.*-amd64\)$/\1/p')
  [[ -n $dep ]] || die "cannot tell which kernel linux-image-amd64 is (apt lists missing? run apt-get update)"
  echo "$dep"
}

# Fills $cache/$kver with vmlinuz and just the modules the guest loads (plus their dependencies), depmod'ed.
# Another run may be preparing the same cache: take a lock, and publish the folder only when complete.
prepare_kernel() {
  local kver=$1 dest=$cache/$1 work mod path
  mkdir -p "$cache"
  exec 9>"$cache/.lock"
  flock 9
  if [[ ! -f $dest/ready ]]; then
    echo "roce-vm: preparing kernel $kver in $cache (one-time download)" >&2
    work=$(mktemp -d "$cache/prepare.XXXXXX")
    cleanup+=("$work")
    (cd "$work" && apt-get download "linux-image-$kver" >apt.log 2>&1) ||
      { tail -n 3 "$work/apt.log" >&2; die "cannot download linux-image-$kver (network or apt lists?)"; }
    dpkg -x "$work"/linux-image-*.deb "$work/deb"
    mkdir -p "$work/kernel/lib/modules/$kver"
    cp "$work/deb/boot/vmlinuz-$kver" "$work/kernel/vmlinuz"
    # depmod wants these lists (of all modules, and of those built in) beside the modules.
    cp "$work/deb/lib/modules/$kver"/modules.{order,builtin,builtin.modinfo} "$work/kernel/lib/modules/$kver/"
    depmod -b "$work/deb" "$kver"
    for mod in "${modules[@]}"; do
      modprobe -d "$work/deb" -S "$kver" --show-depends "$mod" >"$work/deps" || die "kernel $kver has no module $mod"
      while read -r _ path; do
        path=${path#"$work/deb"}
        mkdir -p "$work/kernel/$(dirname "$path")"
        cp "$work/deb/$path" "$work/kernel/$path"
      done < <(grep '^insmod ' "$work/deps")
    done
    depmod -b "$work/kernel" "$kver"
    rm -rf "$dest"
    mv "$work/kernel" "$dest"
    touch "$dest/ready"
  fi
  flock -u 9
}

# PID 1 of the guest (busybox sh). Reports a setup failure in $results/error, the command's status in
# $results/status, then powers off; no status file means the guest never got that far.
write_init() {
  cat <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs dev /dev
# The kernel writes \r\n itself; the tty must not add a second \r to the command's output.
stty -F /dev/console -onlcr
# 9p moves at most msize bytes per request; the default (8 KiB) makes loading programs slow.
P9=trans=virtio,version=9p2000.L,msize=524288

fail() {
  echo "roce-vm: guest setup failed: $*"
  grep -q ' /results ' /proc/mounts || mount -t 9p -o "$P9" results /results 2>/dev/null
  echo "$*" >/results/error
  sync
  poweroff -f
}
# Runs a host program in the chroot. Through env, by absolute path: busybox's chroot would run its own applet
# of the same name (its `ip` knows no veth).
in_host() {
  chroot /host /usr/bin/env PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@" >/dev/null 2>/tmp/err ||
    fail "$* failed: $(head -n 1 /tmp/err)"
}

for m in $(cat /etc/roce-modules); do
  modprobe "$m" 2>/tmp/err || fail "modprobe $m failed: $(head -n 1 /tmp/err)"
done
mount -t 9p -o "$P9" results /results || fail "cannot mount the results folder over 9p"
mount -t 9p -o "$P9,ro,cache=loose" hostroot /host || fail "cannot mount the host root over 9p"
i=0
while read -r dir; do
  mount -t 9p -o "$P9" "rw$i" "/host$dir" || fail "cannot mount $dir writable"
  i=$((i + 1))
done </results/cmd/writable
mount -t proc proc /host/proc
mount -t sysfs sysfs /host/sys
mount -t devtmpfs dev /host/dev
mkdir -p /host/dev/shm /host/dev/pts
mount -t tmpfs shm /host/dev/shm
mount -t devpts devpts /host/dev/pts
mkdir -p /hosttmp
mount -o rbind /host/tmp /hosttmp || fail "cannot keep the host's /tmp"
mount -t tmpfs tmp /host/tmp
while read -r dir; do
  mkdir -p "/host$dir" && mount -o rbind "/hosttmp/${dir#/tmp/}" "/host$dir" || fail "cannot bind $dir into the guest's /tmp"
done </results/cmd/keep_tmp
hostname roce0

# The soft-RoCE device: rxe0 on one end of a veth pair; two processes on it reach each other through 10.9.0.1.
in_host ip link set lo up
in_host ip link add v0 type veth peer name v1
in_host ip addr add 10.9.0.1/24 dev v0
in_host ip link set v0 up
in_host ip link set v1 up
in_host rdma link add rxe0 type rxe netdev v0
# The port follows the netdev's carrier, which may take a moment.
i=0
until grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state; do
  i=$((i + 1))
  [ "$i" -le 10 ] || fail "rxe0 port 1 is not ACTIVE after 10 s"
  sleep 1
done

echo "roce-vm: guest ready after $(cut -d ' ' -f 1 /proc/uptime) s of guest uptime"
ulimit -l unlimited
# Through a pipe, as under ctest or CI: the console is a tty, and programs would color or buffer for one.
{
  chroot /host /bin/bash -c "$(cat /results/cmd/run)" </dev/null
  echo $? >/results/status
} 2>&1 | cat
sync
poweroff -f
EOF
}

# The guest's /init, a static busybox and the modules, packed for -initrd.
write_initramfs() {
  local kver=$1 out=$2 root
  root=$(mktemp -d "$run/initramfs.XXXXXX")
  mkdir -p "$root"/{bin,sbin,etc,proc,sys,dev,tmp,host,results,lib/modules}
  cp "$(command -v busybox)" "$root/bin/busybox"
  # The kernel's own module requests run /sbin/modprobe.
  ln -s ../bin/busybox "$root/sbin/modprobe"
  cp -r "$cache/$kver/lib/modules/$kver" "$root/lib/modules/"
  printf '%s\n' "${modules[@]}" >"$root/etc/roce-modules"
  write_init >"$root/init"
  chmod +x "$root/init"
  (cd "$root" && find . | cpio -o -H newc --quiet) | gzip -1 >"$out"
}

# What the guest runs in the chroot: the caller's cwd, PATH and DCCL_*/NCCL_* variables, then the command.
write_command() {
  local dir=$run/cmd name path
  mkdir -p "$dir"
  : >"$dir/writable"
  for path in "${writable[@]}"; do
    echo "$path" >>"$dir/writable"
  done
  : >"$dir/keep_tmp"
  for path in "$repo" "$PWD" "${writable[@]}"; do
    case $path/ in /tmp/*) echo "$path" >>"$dir/keep_tmp" ;; esac
  done
  {
    echo "export DCCL_ROCE_VM=1 HOME=/root PATH=$(printf '%q' "$PATH")"
    for name in $(compgen -e | grep -E '^(DCCL|NCCL)_'); do
      echo "export $name=$(printf '%q' "${!name}")"
    done
    echo "cd $(printf '%q' "$PWD")"
    echo "exec$(printf ' %q' "${command[@]}")"
  } >"$dir/run"
}

boot() {
  local kver=$1 i virtfs=() rc=0
  for i in "${!writable[@]}"; do
    virtfs+=(-virtfs "local,path=${writable[$i]},mount_tag=rw$i,security_model=none,multidevs=remap")
  done
  echo "roce-vm: booting kernel $kver (timeout ${timeout_s} s)" >&2
  timeout -k 10 "$timeout_s" qemu-system-x86_64 \
    -accel tcg,thread=multi -cpu max -smp 2 -m "$mem_mib" \
    -nodefaults -no-user-config -display none -no-reboot \
    -kernel "$cache/$kver/vmlinuz" -initrd "$run/initrd.gz" \
    -append "console=ttyS0 loglevel=3 panic=-1" \
    -chardev stdio,id=console,signal=off -serial chardev:console \
    -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
    -virtfs "local,path=$run,mount_tag=results,security_model=none,multidevs=remap" \
    "${virtfs[@]}" </dev/null || rc=$?
  # The kernel's last line ("reboot: Power down") ends without a newline.
  echo
  return "$rc"
}

main() {
  parse_args "$@"
  check_tools
  check_paths
  local kver rc=0
  trap 'rm -rf "${cleanup[@]}"' EXIT
  kver=$(kernel_version)
  prepare_kernel "$kver"
  run=$(mktemp -d "${TMPDIR:-/tmp}/roce-vm.XXXXXX")
  cleanup+=("$run")
  write_initramfs "$kver" "$run/initrd.gz"
  write_command
  boot "$kver" || rc=$?
  if ((rc == 124 || rc == 137)); then
    echo "roce-vm: timed out after ${timeout_s} s; qemu was killed" >&2
    exit 124
  fi
  ((rc == 0)) || die "qemu failed (exit status $rc)"
  [[ ! -f $run/error ]] || die "guest setup failed: $(cat "$run/error")"
  [[ -f $run/status ]] || die "the VM stopped before the command finished (kernel panic or no /init? see the console above)"
  exit "$(cat "$run/status")"
}

main "$@"
