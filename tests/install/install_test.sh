#!/bin/sh
# Installs the build into a scratch prefix, then builds and runs a consumer through find_package(dccl) and
# through pkg-config. Usage: install_test.sh <build dir> <source dir>
set -eu
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
test -f "$tmp/prefix/include/dccl.h"
ls "$tmp"/prefix/lib*/libdccl.so > /dev/null
export PKG_CONFIG_PATH="$(ls -d "$tmp"/prefix/lib*/pkgconfig | head -n 1)"
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" > "$tmp/configure.log"
cmake --build "$tmp/consumer" > "$tmp/build.log"
libdir=$(dirname "$(ls "$tmp"/prefix/lib*/libdccl.so | head -n 1)")
LD_LIBRARY_PATH="$libdir" "$tmp/consumer/consumer_cmake"
LD_LIBRARY_PATH="$libdir" "$tmp/consumer/consumer_pkgconfig"
echo "install test: 1 passed, 0 failed"
