// Which CPU kernels run: the AVX-512 versions where the CPU has them, unless the environment
// asks for the baseline (the ctest run that repeats the op suite on it sets BRAID_CPU_AVX512=0).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string_view>

#include "ops/cpu/avx512_dispatch.h"

namespace {

TEST(CpuDispatch, FollowsTheCpuUnlessTheEnvironmentForcesTheBaseline) {
  const char* setting = std::getenv("BRAID_CPU_AVX512");
  const bool forced_baseline = setting && std::string_view(setting) == "0";
  bool cpu_has_avx512 = false;
#if defined(__x86_64__)
  cpu_has_avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                   __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
#endif
  EXPECT_EQ(braid::ops::cpu::use_avx512(), cpu_has_avx512 && !forced_baseline)
      << "BRAID_CPU_AVX512=" << (setting ? setting : "(unset)");
}

}  // namespace
