// The CPU backend's process-wide settings, apart from its kernels: the thread count and the allocation cache.
// Code that only sets threads (the CLI, the experiment drivers) includes this, not cpu_kernels.h.
#pragma once
#include <cstddef>

namespace ponder::cpu {

// Freed CPU blocks wait in a cache keyed by size for the next request of that size (tensor/cpu/backend.cpp),
// up to a limit (1 GiB unless set); a block that would exceed it is returned to the system.
void set_alloc_cache_limit(size_t bytes);
size_t alloc_cache_bytes();
// Returns every cached block to the system (before measuring peak memory, say).
void release_alloc_cache();

// Thread count shared by OpenMP kernels and OpenBLAS (the OpenMP build of OpenBLAS uses the same
// pool, so setting it once prevents oversubscription).
void set_num_threads(int n);
int num_threads();

}  // namespace ponder::cpu
