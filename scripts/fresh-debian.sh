#!/usr/bin/env bash
# Proves that the README's two commands work from nothing: builds a bare Debian 12 (bookworm, minbase) root
# filesystem with debootstrap, copies this repository's committed HEAD into it (git archive: no work tree
# changes, no build directory) and runs there, as root in a chroot inside a private mount and PID namespace:
#   bash scripts/run-perf.sh                  installs its packages, builds, runs the 2-rank all_reduce_perf
#   bash scripts/run-tests.sh -L unit ...     installs the rest, builds everything, runs the unit tests
# Any failing step fails the script. Nothing is mounted in the host's namespace; the working copy is removed.
#
# Cache (DCCL_FRESH_CACHE, default /var/cache/dccl-fresh-debian): two layers, never changed once written:
#   base-KEY  the bare debootstrap tree; KEY hashes the suite, variant and --include list
#   deps-KEY  that tree after a run in which the README commands installed their packages (the repository copy
#             and the downloaded .debs removed); KEY hashes the base key and scripts/install-deps.sh (the
#             package lists live there)
# A run starts from a throwaway copy (an overlayfs mount inside the namespace, else cp -a) of deps-KEY if it
# exists, so the install step finds everything installed and only the build runs; otherwise from base-KEY, so
# the README commands must install everything themselves (the proof), and the result is saved as deps-KEY.
# Layers are written under a temporary name and renamed when complete; older layers of either kind are pruned.
#
# Usage: bash scripts/fresh-debian.sh    (as root; needs git, unshare and chroot; installs debootstrap if missing)
# Environment: DCCL_FRESH_CACHE (cache folder), DCCL_FRESH_MIRROR (default http://deb.debian.org/debian),
# DCCL_FRESH_NO_OVERLAY=1 (use the cp -a fallback even where overlayfs works).
set -euo pipefail

suite=bookworm
variant=minbase
include=()   # minbase has bash, coreutils, apt and hostname: all that running the README's scripts needs
mirror=${DCCL_FRESH_MIRROR:-http://deb.debian.org/debian}
cache=${DCCL_FRESH_CACHE:-/var/cache/dccl-fresh-debian}
src=/src/dccl   # where the repository copy lives inside the root filesystem
self=$(readlink -f "${BASH_SOURCE[0]}")
repo=$(cd "$(dirname "$self")/.." && pwd)

log() { printf 'fresh-debian: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
hash16() { sha256sum | cut -c1-16; }

# Runs "$@" and prints how long it took (the phase times in docs/testing.md come from these lines).
timed() {
  local what=$1 t0=$SECONDS rc=0
  shift
  "$@" || rc=$?
  if ((rc)); then log "$what failed (status $rc) after $((SECONDS - t0)) s"; else log "$what took $((SECONDS - t0)) s"; fi
  return "$rc"
}

# Prefixes every line with the seconds since the step began, so the phases inside one README command
# (install, build, run) can be told apart in the log.
stamp() {
  local t0=$SECONDS line
  while IFS= read -r line; do printf '[%4d s] %s\n' $((SECONDS - t0)) "$line"; done
}

# ---- inside the namespace -------------------------------------------------------------------------------

# A minimal /dev of its own (no host devtmpfs in the tree, so nothing there can touch the host's devices), and
# the API filesystems: /proc for the PID namespace, /sys for hwloc's topology, /dev/shm for the shm transport.
mount_api_filesystems() {
  local root=$1 node
  mount -t proc proc "$root/proc"
  mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$root/sys"
  mount -t tmpfs -o mode=755,nosuid dev "$root/dev"
  for node in null zero full random urandom tty; do
    touch "$root/dev/$node"
    mount --bind "/dev/$node" "$root/dev/$node"
  done
  mkdir "$root/dev/shm" "$root/dev/pts"
  mount -t tmpfs -o mode=1777,nosuid,nodev shm "$root/dev/shm"
  mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$root/dev/pts"
  ln -s pts/ptmx "$root/dev/ptmx"
  ln -s /proc/self/fd "$root/dev/fd"
  ln -s /proc/self/fd/0 "$root/dev/stdin"
  ln -s /proc/self/fd/1 "$root/dev/stdout"
  ln -s /proc/self/fd/2 "$root/dev/stderr"
  # apt needs name resolution; a copy, not a bind, since the tree's resolv.conf may be a symlink.
  rm -f "$root/etc/resolv.conf"
  cp -L /etc/resolv.conf "$root/etc/resolv.conf"
}

# Runs one command in the chroot with a clean environment (nothing from the host's PATH, compilers or CUDA).
in_chroot() {
  local root=$1
  shift
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb CI="${CI:-}" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    bash -c "cd $src && $*"
}

# The README's commands, each checked (pipefail carries the command's status through stamp).
run_readme_commands() {
  local root=$1
  log "in the chroot: bash scripts/run-perf.sh"
  timed "run-perf.sh (install build deps, build the perf tool, 2-rank perf run)" \
    in_chroot "$root" "bash scripts/run-perf.sh 2>&1" | stamp
  log "in the chroot: bash scripts/run-tests.sh -L unit --no-tests=error"
  timed "run-tests.sh -L unit (install the rest, build everything, unit tests)" \
    in_chroot "$root" "bash scripts/run-tests.sh -L unit --no-tests=error 2>&1" | stamp
}

# Entered through unshare: lays the throwaway root (overlay on the layer, else a copy), mounts, runs, and when
# asked saves the tree (less the repository copy) to save_to.
inside() {
  local layer=$1 work=$2 save_to=$3 root=$2/root
  mount --make-rprivate /
  mkdir "$root" "$work/upper" "$work/ovl"
  if [[ -z ${DCCL_FRESH_NO_OVERLAY:-} ]] &&
     mount -t overlay overlay -o "lowerdir=$layer,upperdir=$work/upper,workdir=$work/ovl" "$root"; then
    log "throwaway root: overlayfs on $layer"
  else
    log "throwaway root: a copy of $layer (overlayfs unavailable, or DCCL_FRESH_NO_OVERLAY set)"
    timed "cp -a of the layer" cp -a "$layer/." "$root/"
  fi
  mkdir -p "$root$src"
  git -C "$repo" archive HEAD | tar -x -C "$root$src"
  log "copied $(git -C "$repo" rev-parse --short HEAD) (committed HEAD) to $src"
  mount_api_filesystems "$root"

  run_readme_commands "$root"

  [[ -n $save_to ]] || return 0
  umount -R "$root/dev" "$root/sys" "$root/proc"
  rm -rf "${root:?}/src" "$root"/var/cache/apt/archives/*.deb
  if mountpoint -q "$root"; then
    timed "saving the installed tree (cp -a from the overlay)" cp -a "$root/." "$save_to/"
  else
    rmdir "$save_to" && mv "$root" "$save_to"
  fi
}

# ---- on the host ----------------------------------------------------------------------------------------

need_root_and_tools() {
  [[ $(id -u) -eq 0 ]] || die "run as root (debootstrap, chroot and mounts need it)"
  local tool
  for tool in git unshare chroot; do
    command -v "$tool" >/dev/null || die "$tool is missing"
  done
  git -C "$repo" rev-parse --verify -q HEAD >/dev/null || die "$repo is not a git checkout with a commit"
  if ! command -v debootstrap >/dev/null; then
    log "installing debootstrap"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap debian-archive-keyring
  fi
}

# Removes the other layers of one kind once a new one is in place (each is hundreds of MB).
prune_layers() {
  local keep=$1 kind=$2 dir
  for dir in "$cache/$kind"-*; do
    [[ $dir == "$keep" || ! -d $dir ]] || { log "pruning old layer $dir"; rm -rf --one-file-system "$dir"; }
  done
}

# Layer (a): the bare debootstrap tree.
ensure_base() {
  local base=$1 tree
  if [[ -d $base ]]; then
    log "layer base: hit ($base)"
    return
  fi
  log "layer base: miss, running debootstrap --variant=$variant $suite from $mirror"
  tree=$(mktemp -d "$cache/tmp.XXXXXX")
  timed "debootstrap" bootstrap "$tree"
  rm -f "$tree"/var/cache/apt/archives/*.deb
  mv "$tree" "$base"
  prune_layers "$base" base
}

# debootstrap's chatter goes to a log, shown only when it fails.
bootstrap() {
  local tree=$1 includes=()
  if ((${#include[@]})); then includes=("--include=$(IFS=,; echo "${include[*]}")"); fi
  debootstrap --variant="$variant" "${includes[@]}" "$suite" "$tree" "$mirror" >"$tree.log" 2>&1 \
    || { tail -n 30 "$tree.log" >&2; log "debootstrap failed (the end of its log is above)"; return 1; }
  rm -f "$tree.log"
}

remove_scratch() {
  local dir
  for dir in "$work" "$tmp"; do
    [[ -z $dir ]] || rm -rf --one-file-system "$dir"
  done
}

main() {
  if [[ ${1:-} == --inside ]]; then
    shift
    inside "$@"
    return
  fi
  need_root_and_tools
  work="" tmp=""   # global: remove_scratch removes them
  mkdir -p "$cache"
  exec 9>"$cache/lock"
  flock 9   # one run at a time per cache; leftovers of an interrupted run go
  rm -rf --one-file-system "$cache"/tmp.* "$cache"/work.*
  # The working copy and a half-written layer go however the script ends. (Mounts need no cleanup: they live
  # only in the namespace, which ends with its last process.)
  trap remove_scratch EXIT

  local base_key deps_key base deps layer save_to=""
  base_key=$(printf '%s\n' "$suite" "$variant" "${include[*]}" | hash16)
  deps_key=$( { echo "$base_key"; git -C "$repo" show HEAD:scripts/install-deps.sh; } | hash16)
  base=$cache/base-$base_key
  deps=$cache/deps-$deps_key
  local start=$SECONDS

  if [[ -d $deps ]]; then
    log "layer deps: hit ($deps); the install step should find everything installed"
    layer=$deps
  else
    log "layer deps: miss; starting from the bare tree, so the README commands install everything themselves"
    ensure_base "$base"
    layer=$base
    tmp=$(mktemp -d "$cache/tmp.XXXXXX")
    save_to=$tmp
  fi

  work=$(mktemp -d "$cache/work.XXXXXX")
  # --kill-child: if this script is killed, everything in the namespace goes with it.
  unshare --mount --pid --fork --kill-child bash "$self" --inside "$layer" "$work" "$save_to"

  if [[ -n $tmp ]]; then
    mv "$tmp" "$deps"
    tmp=""
    log "layer deps: saved as $deps"
    prune_layers "$deps" deps
  fi
  log "both README commands passed in a fresh Debian $suite ($((SECONDS - start)) s in all)"
}

main "$@"
