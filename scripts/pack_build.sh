#!/usr/bin/env bash
# Packs a build for a GPU machine that has the NVIDIA driver and cuBLAS but not this project's build dependencies:
# ponder and the test executables, stripped, with the shared libraries they load that such a machine may lack
# (OpenBLAS and its Fortran runtime, yaml-cpp, OpenMP, the CUDA runtime; cuBLAS itself is too large and is taken
# from the machine). The data the checks read is not packed: the checkout's data/ travels with it.
#
#   bash scripts/pack_build.sh [BUILD_DIR] [OUT]        (defaults: build-gpu, gpu_pkg/bundle.tar.xz)
#
# Configure the build without MPI, which is not packed: meson setup build-gpu -Dmpi=disabled -Dcuda=enabled
# --native-file build/nvcc.ini (made by scripts/setup.sh), then ninja -C build-gpu.
#
# There, in a checkout of the same commit (the CUDA libraries' folder may differ):
#   tar xJf OUT && export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64 PONDER_DATA_DIR=$PWD/data
#   bash scripts/gpu_check.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-gpu}
out=${2:-gpu_pkg/bundle.tar.xz}
ponder="$build/experiments/ponder"
[ -x "$ponder" ] || { echo "pack_build.sh: no ponder binary at $ponder (configure and build $build first)" >&2; exit 2; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$build/experiments" "$stage/$build/tests" "$stage/lib"
cp "$ponder" "$stage/$build/experiments/"
for t in "$build"/tests/test_*; do
  [ -f "$t" ] && [ -x "$t" ] && cp "$t" "$stage/$build/tests/"
done
strip "$stage/$build/experiments/ponder" "$stage/$build"/tests/test_*
# The libraries ponder resolves here whose names say they are one of the dependencies above.
ldd "$ponder" | awk '$3 ~ /^\// {print $3}' | grep -E 'openblas|gfortran|quadmath|yaml-cpp|gomp|cudart' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
if ldd "$ponder" | grep -q 'libmpi'; then
  echo "pack_build.sh: $ponder links MPI, which is not packed; configure $build with -Dmpi=disabled" >&2
  exit 2
fi
mkdir -p "$(dirname "$out")"
tar -C "$stage" -cJf "$out" .
echo "pack_build.sh: $out ($(du -h "$out" | cut -f1)): $(ls "$stage/lib" | tr '\n' ' ')"
