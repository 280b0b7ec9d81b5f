// Code that runs on the GPU and on the CPU alike (the dual-form kernels' body, tensor/cuda/ttt_dual_*.h): PONDER_HD
// marks a function for both under nvcc and is empty for other compilers; PONDER_UNROLL asks nvcc's device pass to
// unroll the loop that follows (other compilers and nvcc's host pass do not know the pragma).
#pragma once

#ifdef __CUDACC__
#define PONDER_HD __host__ __device__
#else
#define PONDER_HD
#endif

#ifdef __CUDA_ARCH__
#define PONDER_UNROLL _Pragma("unroll")
#else
#define PONDER_UNROLL
#endif
