// The emulator's vector_functions.h: CUDA's make_<type>N constructors for the vector types.
#pragma once

#include "vector_types.h"

#define BRAID_SIMT_MAKERS(prefix, T)                         \
  constexpr prefix##1 make_##prefix##1(T x) {                \
    return prefix##1 {x};                                    \
  }                                                          \
  constexpr prefix##2 make_##prefix##2(T x, T y) {           \
    return prefix##2 {x, y};                                 \
  }                                                          \
  constexpr prefix##3 make_##prefix##3(T x, T y, T z) {      \
    return prefix##3 {x, y, z};                              \
  }                                                          \
  constexpr prefix##4 make_##prefix##4(T x, T y, T z, T w) { \
    return prefix##4 {x, y, z, w};                           \
  }

BRAID_SIMT_MAKERS(char, signed char)
BRAID_SIMT_MAKERS(uchar, unsigned char)
BRAID_SIMT_MAKERS(short, short)
BRAID_SIMT_MAKERS(ushort, unsigned short)
BRAID_SIMT_MAKERS(int, int)
BRAID_SIMT_MAKERS(uint, unsigned int)
BRAID_SIMT_MAKERS(long, long)
BRAID_SIMT_MAKERS(ulong, unsigned long)
BRAID_SIMT_MAKERS(longlong, long long)
BRAID_SIMT_MAKERS(ulonglong, unsigned long long)
BRAID_SIMT_MAKERS(float, float)
BRAID_SIMT_MAKERS(double, double)

#undef BRAID_SIMT_MAKERS
