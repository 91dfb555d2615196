// Planted bug: a block reduction without its leading barrier, called twice per kernel (as a
// softmax does for max and sum): the second call overwrites partials the first still reads.
#include "reduce_variants.cuh"
#include "test_kernels.h"

namespace braid::simt::testing {
namespace {

template <bool kLeading, bool kPublish>
__global__ void reduce_twice_kernel(const float* in, float* out) {
  const float v = in[threadIdx.x];
  const float a = block_sum_variant<kLeading, kPublish>(v);
  const float b = block_sum_variant<kLeading, kPublish>(2.0f * v);
  if (threadIdx.x == 0) {
    out[0] = a;
    out[1] = b;
  }
}

}  // namespace

void run_reduce_without_first_barrier(const float* in, float* out, bool buggy) {
  if (buggy) {
    reduce_twice_kernel<false, true><<<1, 128>>>(in, out);
  } else {
    reduce_twice_kernel<true, true><<<1, 128>>>(in, out);
  }
}

}  // namespace braid::simt::testing
