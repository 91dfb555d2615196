// CUDA fill of a strided tensor with one value converted to its dtype.
#pragma once

#include "braid/core/tensor.h"

namespace braid::cuda {

// Every element of out (a cuda tensor of any dtype and any layout without zero strides) =
// value, converted on the host exactly as the CPU kernel converts it (so the bits agree), then
// written as the element's bit pattern. A dense fill with an all-zero pattern is a memset.
void fill(float value, Tensor& out);

}  // namespace braid::cuda
