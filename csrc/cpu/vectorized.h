// at::vec::Vectorized<T> for the CPU this file is compiled for.
//
// NOTE [ How wide is Vectorized<T>? ]
// ATen compiles each of its vectorized kernels several times, once per CPU capability, with both the
// compiler flags and the macros CPU_CAPABILITY_AVX2 / CPU_CAPABILITY_AVX512 (and CPU_CAPABILITY, the
// namespace that keeps the copies apart), and picks a copy at run time. On x86 the header selects its
// intrinsics by those macros alone: without them, Vectorized<float> is a plain array of 8 floats with
// scalar loops (ATen/cpu/vec/vec_base.h: VECTOR_WIDTH is 32 bytes), whatever -march says. (On aarch64
// without SVE256, vec_base.h sets VECTOR_WIDTH to 16 bytes and vec128/ gives Vectorized<float> 4 floats
// in a NEON register, with or without the macros.) This header derives the macros from what the compiler
// was allowed to use: a JIT-built layer is compiled with -march=native and gets the widest vectors of the
// machine that runs it; a portable x86 build (no -m flags) gets the generic version, which is still correct.
#pragma once

#if defined(VECTOR_WIDTH)
#error "include cpu/vectorized.h before any ATen/cpu/vec header, or the capability macros come too late"
#endif

// A file may define MYOPS_AT_MOST_AVX2 first to stay with 256-bit vectors on an AVX-512 machine, as
// ATen does for most of its kernels (REGISTER_DISPATCH leaves AVX-512 out unless a kernel opts in).
#if !defined(CPU_CAPABILITY)
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__) && \
    !defined(MYOPS_AT_MOST_AVX2)
#define CPU_CAPABILITY AVX512
#define CPU_CAPABILITY_AVX512
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define CPU_CAPABILITY AVX2
#define CPU_CAPABILITY_AVX2
#endif
#endif

#include <ATen/cpu/vec/vec.h>
