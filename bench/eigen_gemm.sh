#!/usr/bin/env bash
# Eigen's matrix product against OpenBLAS's sgemm at this project's shapes, one thread each (docs/engine.md §2,
# "Why not Eigen"). Needs libeigen3-dev, which scripts/setup.sh does not install: apt-get install libeigen3-dev.
# Usage: bench/eigen_gemm.sh [OUT.json]   (prints one JSON line per shape; with OUT, also writes them as a JSON list)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="$(mktemp -d)/eigen_gemm"
g++ -O3 -march=native -DNDEBUG -I/usr/include/eigen3 "$here/eigen_gemm.cpp" -o "$bin" \
  $(pkg-config --cflags --libs openblas 2>/dev/null || echo -lopenblas)
lines="$(OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$bin")"
echo "$lines"
if [[ $# -ge 1 ]]; then
  { echo "{\"machine\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')\","
    echo " \"command\": \"bench/eigen_gemm.sh\", \"threads\": 1, \"shapes\": ["
    echo "$lines" | sed '$!s/$/,/'
    echo "]}"; } > "$1"
fi
