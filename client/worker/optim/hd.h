// Portability macros for code shared by the host compiler and nvcc: the
// element-wise Adam formula and the float conversions it uses.
#pragma once

#if defined(__CUDACC__)
#define ZSHARD_HD __host__ __device__
#define ZSHARD_HD_INLINE __host__ __device__ __forceinline__
#else
#define ZSHARD_HD
#define ZSHARD_HD_INLINE inline __attribute__((always_inline))
#endif
