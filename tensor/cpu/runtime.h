// The CPU backend's process-wide settings, apart from its kernels: the thread count and the allocation cache.
// Code that only sets threads (the CLI, the experiment drivers) includes this, not cpu_kernels.h.
#pragma once
#include <cstddef>
#include <string>

#include "tensor/precision.h"

namespace ponder::cpu {

// Freed CPU blocks wait in a cache keyed by size for the next request of that size (tensor/cpu/backend.cpp),
// up to a limit (1 GiB unless set); a block that would exceed it is returned to the system.
void set_alloc_cache_limit(size_t bytes);
size_t alloc_cache_bytes();
// Returns every cached block to the system (before measuring peak memory, say).
void release_alloc_cache();

// How float32 matmuls run at precision p, for logs and benchmark headers (tensor/cpu/matmul.cpp): sgemm at f32;
// at bf16, bf16 dot products where the build and CPU have them (tensor/cpu/gemm.h); else sgemm on rounded copies.
const char* matmul_path(MatmulPrecision p);

// Thread count shared by OpenMP kernels and OpenBLAS (the OpenMP build of OpenBLAS uses the same
// pool, so setting it once prevents oversubscription).
void set_num_threads(int n);
int num_threads();

// OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernels from the CPU's model number when it loads, and runs
// an Intel model it has no entry for on its SSE3 "Prescott" kernels. Debian 12's OpenBLAS 0.3.21 has no entry for
// Sapphire or Emerald Rapids, where sgemm then ran at 32 GFLOP/s a core instead of 149 with the AVX-512 kernels
// (`ponder bench matmul`, 512^3, one thread). Returns the OPENBLAS_CORETYPE that names the kernels this CPU runs
// (SkylakeX for AVX-512, Haswell for AVX2 and FMA) when OpenBLAS fell back and the CPU has them; "" when OpenBLAS's
// choice stands (it knew the CPU, nothing better runs here, or OPENBLAS_CORETYPE is already set). OpenBLAS reads
// the variable only when it loads, so a program applies it by re-executing itself (experiments/cli/main.cpp).
std::string blas_core_override();
// The kernels this CPU can run, by its features alone: "SkylakeX", "Haswell" or "".
std::string blas_core_for_this_cpu();

}  // namespace ponder::cpu
