#!/bin/sh
# nvcc, writing the dependency file ninja reads. Meson 1.0 (Debian 12) declares a depfile ($out.d) for its CUDA
# compile rule but passes nvcc no flag that writes one, so ninja never saw the sources a unity .cu file includes
# nor any header: an edited tensor/cuda/*.cu or *.h rebuilt nothing and old code ran. scripts/setup.sh configures
# meson with this wrapper (a native file in the build folder); it adds -MD -MF OUT.d to a compile (-c … -o OUT) and passes
# everything else through.
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
out="" compile=0 prev=""
for a in "$@"; do
  [ "$prev" = "-o" ] && out=$a
  [ "$a" = "-c" ] && compile=1
  prev=$a
done
if [ "$compile" = 1 ] && [ -n "$out" ]; then exec "$nvcc" "$@" -MD -MF "$out.d"; fi
exec "$nvcc" "$@"
