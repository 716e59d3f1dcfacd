#!/usr/bin/env bash
# libnccl.so.2 exports exactly NVIDIA's names (cmake/nccl_exports.txt): nccl* weak, pnccl* strong twins,
# ncclResetDebugInitInternal strong alone; no symbol versions; soname libnccl.so.2; no CUDA library needed at
# load time. Where the CUDA toolkit carries NVIDIA's libnccl.so.2, the two export tables must be identical.
# Usage: check_nccl_exports.sh LIBNCCL EXPORTS_TXT [NVIDIA_LIBNCCL]
set -euo pipefail
lib=$1
list=$2
nvidia=${3:-/usr/local/cuda/lib64/libnccl.so.2}
fail=0
bad() { echo "FAIL: $*"; fail=1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

readelf -d "$lib" | grep -q 'SONAME.*\[libnccl\.so\.2\]' || bad "soname is not libnccl.so.2"
if readelf -d "$lib" | grep NEEDED | grep -E 'libcuda\.so|libcudart\.so'; then bad "needs a CUDA library at load time"; fi
# What the list says the table must be.
grep '^nccl' "$list" | while read -r name; do
  if [ "$name" = ncclResetDebugInitInternal ]; then
    echo "T $name"
  else
    echo "W $name"
    echo "T p$name"
  fi
done | sort -k2 > "$tmp/want"
nm -D --defined-only "$lib" | awk '{print $2, $3}' | sort -k2 > "$tmp/got"
diff "$tmp/want" "$tmp/got" > "$tmp/diff" || { bad "exports differ from $list (< wanted, > found):"; cat "$tmp/diff"; }
# Defined symbols carry no version (NVIDIA's have none; a versioned name would not bind to an unversioned import).
if readelf --dyn-syms -W "$lib" | awk '$7 != "UND" && $8 ~ /@/' | grep -q .; then bad "a defined symbol has a version"; fi
echo "$(wc -l < "$tmp/got") names exported, as listed"
if [ -e "$nvidia" ]; then
  nm -D --defined-only "$nvidia" | awk '{print $2, $3}' | sort -k2 > "$tmp/nvidia"
  if diff "$tmp/nvidia" "$tmp/got" > "$tmp/diff2"; then
    echo "identical to $nvidia ($(wc -l < "$tmp/nvidia") names, same binding)"
  else
    bad "exports differ from NVIDIA's $nvidia:"
    cat "$tmp/diff2"
  fi
else
  echo "(no $nvidia here: compared with the list only)"
fi
[ $fail = 0 ] && echo "PASS: libnccl.so.2's exports" || exit 1
