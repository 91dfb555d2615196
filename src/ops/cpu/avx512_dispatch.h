// Run-time choice of AVX-512 code paths in a library built for x86-64-v3.
//
// A kernel that gains from 16-lane vectors writes its body once as a template over the lane
// type (Vec8, Vec16 from fast_math.h), always inlined, and instantiates it in two functions:
// one for the baseline and one marked BRAID_TARGET_AVX512. The caller picks with use_avx512().
// The 16-lane body is only ever inlined into the AVX-512 function, so passing 64-byte vectors
// without AVX-512 (what -Wpsabi warns about) never happens; files that include this header
// therefore silence that warning.
#pragma once

#pragma GCC diagnostic ignored "-Wpsabi"

#include <cstdlib>
#include <string_view>

#if defined(__x86_64__) && defined(__GNUC__)
#define BRAID_HAVE_AVX512_TARGET 1
#define BRAID_TARGET_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw")))
#else
#define BRAID_HAVE_AVX512_TARGET 0
#define BRAID_TARGET_AVX512
#endif

namespace braid::ops::cpu {

// True where the CPU runs the BRAID_TARGET_AVX512 functions (and the library was built with a
// compiler that makes them); false sends callers to the baseline functions. BRAID_CPU_AVX512=0
// in the environment forces the baseline, so that tests cover it on AVX-512 machines too.
inline bool use_avx512() {
#if BRAID_HAVE_AVX512_TARGET
  static const bool yes = [] {
    const char* setting = std::getenv("BRAID_CPU_AVX512");
    if (setting && std::string_view(setting) == "0") return false;
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
  }();
  return yes;
#else
  return false;
#endif
}

}  // namespace braid::ops::cpu
