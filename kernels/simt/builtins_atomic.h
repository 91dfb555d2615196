// Kernel-side atomics with CUDA's overload set (int, unsigned, unsigned long long, float,
// double, ...): really atomic across host threads, checked as atomic accesses (atomics never race
// with each other), and a scheduling point.
#pragma once

int atomicAdd(int* address, int val);
unsigned atomicAdd(unsigned* address, unsigned val);
unsigned long long atomicAdd(unsigned long long* address, unsigned long long val);
float atomicAdd(float* address, float val);
double atomicAdd(double* address, double val);

int atomicSub(int* address, int val);
unsigned atomicSub(unsigned* address, unsigned val);

int atomicExch(int* address, int val);
unsigned atomicExch(unsigned* address, unsigned val);
unsigned long long atomicExch(unsigned long long* address, unsigned long long val);
float atomicExch(float* address, float val);

int atomicMin(int* address, int val);
unsigned atomicMin(unsigned* address, unsigned val);
long long atomicMin(long long* address, long long val);
unsigned long long atomicMin(unsigned long long* address, unsigned long long val);
int atomicMax(int* address, int val);
unsigned atomicMax(unsigned* address, unsigned val);
long long atomicMax(long long* address, long long val);
unsigned long long atomicMax(unsigned long long* address, unsigned long long val);

// ((old >= val) ? 0 : old + 1) and (((old == 0) || (old > val)) ? val : old - 1).
unsigned atomicInc(unsigned* address, unsigned val);
unsigned atomicDec(unsigned* address, unsigned val);

int atomicCAS(int* address, int compare, int val);
unsigned atomicCAS(unsigned* address, unsigned compare, unsigned val);
unsigned long long atomicCAS(unsigned long long* address, unsigned long long compare,
                             unsigned long long val);
unsigned short atomicCAS(unsigned short* address, unsigned short compare, unsigned short val);

int atomicAnd(int* address, int val);
unsigned atomicAnd(unsigned* address, unsigned val);
unsigned long long atomicAnd(unsigned long long* address, unsigned long long val);
int atomicOr(int* address, int val);
unsigned atomicOr(unsigned* address, unsigned val);
unsigned long long atomicOr(unsigned long long* address, unsigned long long val);
int atomicXor(int* address, int val);
unsigned atomicXor(unsigned* address, unsigned val);
unsigned long long atomicXor(unsigned long long* address, unsigned long long val);

// The _block and _system scopes are the same operations here (one address space, and every
// atomic is sequentially consistent).
#define BRAID_SIMT_SCOPED_ATOMIC(name)                            \
  template <class... A>                                           \
  inline auto name##_block(A... args)->decltype(name(args...)) {  \
    return name(args...);                                         \
  }                                                               \
  template <class... A>                                           \
  inline auto name##_system(A... args)->decltype(name(args...)) { \
    return name(args...);                                         \
  }
BRAID_SIMT_SCOPED_ATOMIC(atomicAdd)
BRAID_SIMT_SCOPED_ATOMIC(atomicSub)
BRAID_SIMT_SCOPED_ATOMIC(atomicExch)
BRAID_SIMT_SCOPED_ATOMIC(atomicMin)
BRAID_SIMT_SCOPED_ATOMIC(atomicMax)
BRAID_SIMT_SCOPED_ATOMIC(atomicInc)
BRAID_SIMT_SCOPED_ATOMIC(atomicDec)
BRAID_SIMT_SCOPED_ATOMIC(atomicCAS)
BRAID_SIMT_SCOPED_ATOMIC(atomicAnd)
BRAID_SIMT_SCOPED_ATOMIC(atomicOr)
BRAID_SIMT_SCOPED_ATOMIC(atomicXor)
#undef BRAID_SIMT_SCOPED_ATOMIC
