// The emulator's vector_types.h: CUDA's built-in vector types (char1..double4, dim3) as host
// structs with CUDA's sizes and alignments, so kernels and host code exchange them unchanged.
#pragma once

// The N-component types. CUDA aligns the 2- and 4-component ones to their whole size (float4 is
// 16-byte aligned, which vectorised loads rely on) and the 1- and 3-component ones to a scalar.
#define BRAID_SIMT_VECTOR1(name, T) \
  struct name {                     \
    T x;                            \
  }
#define BRAID_SIMT_VECTOR2(name, T, align) \
  struct alignas(align) name {             \
    T x, y;                                \
  }
#define BRAID_SIMT_VECTOR3(name, T) \
  struct name {                     \
    T x, y, z;                      \
  }
#define BRAID_SIMT_VECTOR4(name, T, align) \
  struct alignas(align) name {             \
    T x, y, z, w;                          \
  }
#define BRAID_SIMT_VECTORS(prefix, T)              \
  BRAID_SIMT_VECTOR1(prefix##1, T);                \
  BRAID_SIMT_VECTOR2(prefix##2, T, 2 * sizeof(T)); \
  BRAID_SIMT_VECTOR3(prefix##3, T);                \
  BRAID_SIMT_VECTOR4(prefix##4, T, 4 * sizeof(T) > 16 ? 16 : 4 * sizeof(T))

BRAID_SIMT_VECTORS(char, signed char);
BRAID_SIMT_VECTORS(uchar, unsigned char);
BRAID_SIMT_VECTORS(short, short);
BRAID_SIMT_VECTORS(ushort, unsigned short);
BRAID_SIMT_VECTORS(int, int);
BRAID_SIMT_VECTORS(uint, unsigned int);
BRAID_SIMT_VECTORS(long, long);
BRAID_SIMT_VECTORS(ulong, unsigned long);
BRAID_SIMT_VECTORS(longlong, long long);
BRAID_SIMT_VECTORS(ulonglong, unsigned long long);
BRAID_SIMT_VECTORS(float, float);
BRAID_SIMT_VECTORS(double, double);

#undef BRAID_SIMT_VECTORS
#undef BRAID_SIMT_VECTOR1
#undef BRAID_SIMT_VECTOR2
#undef BRAID_SIMT_VECTOR3
#undef BRAID_SIMT_VECTOR4

// Launch dimensions: unspecified components are 1, and a uint3 (threadIdx, blockIdx) converts.
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
      : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};
