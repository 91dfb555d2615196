// Tensor handles: factories, shared-storage views and their strides, dense copies, dtype
// conversion in copy_, fill_, metadata errors and the host allocator's counters.
#include <cstdint>
#include <cstring>
#include <limits>

#include "braid/core/allocator.h"
#include "braid/core/tensor.h"
#include "support/test_util.h"

namespace braid::testing {
namespace {

TEST(Tensor, FactoriesAndMetadata) {
  Tensor e = Tensor::empty({2, 3, 4});
  EXPECT_EQ(e.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(e.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(e.numel(), 24);
  EXPECT_EQ(e.dim(), 3);
  EXPECT_EQ(e.offset(), 0);
  EXPECT_EQ(e.dtype(), DType::f32);
  EXPECT_TRUE(e.device().is_cpu());
  EXPECT_TRUE(e.is_contiguous());
  EXPECT_EQ(e.nbytes(), 96u);
  EXPECT_EQ(e.size(-1), 4);
  EXPECT_EQ(e.stride(-3), 12);
  EXPECT_EQ(e.str(), "f32[2, 3, 4]");
  EXPECT_EQ(Tensor::zeros({3}, DType::bf16).str(), "bf16[3]");
  EXPECT_EQ(Tensor().str(), "undefined");
  for (double v : to_double(Tensor::zeros({5}))) EXPECT_EQ(v, 0.0);
  for (double v : to_double(Tensor::full({2, 2}, 2.5f))) EXPECT_EQ(v, 2.5);
  Tensor s = Tensor::full({}, 7.0f);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.item(), 7.0f);
  Tensor ids = Tensor::from_vector(std::vector<int32_t>{1, -2, 3}, {3});
  EXPECT_EQ(ids.dtype(), DType::i32);
  EXPECT_EQ(ids.data<int32_t>()[1], -2);
  EXPECT_EQ(contiguous_strides({2, 0, 3}), (Shape{3, 3, 1}));
  EXPECT_EQ(shape_numel({}), 1);
}

TEST(Tensor, MetadataErrors) {
  Tensor t = Tensor::zeros({2, 3});
  EXPECT_ERROR_CONTAINS(t.size(2), "dimension 2 out of range for tensor f32[2, 3]");
  EXPECT_ERROR_CONTAINS(t.stride(-3), "dimension -3 out of range");
  EXPECT_ERROR_CONTAINS(Tensor::from_vector(std::vector<float>{1, 2, 3}, {2, 2}), "3 values");
  EXPECT_ERROR_CONTAINS(t.data<int32_t>(), "accessed as i32");
  EXPECT_ERROR_CONTAINS(t.item(), "single-element");
  EXPECT_ERROR_CONTAINS(Tensor().shape(), "undefined tensor");
  EXPECT_ERROR_CONTAINS(shape_numel({2, -1}), "negative dimension");
  EXPECT_ERROR_CONTAINS(t.alias({6}, {1, 1}, 0), "differ in rank");
  EXPECT_ERROR_CONTAINS(t.set_grad(Tensor::zeros({3, 2})), "does not match");
  EXPECT_ERROR_CONTAINS(Tensor::from_storage(t.storage(), {7}, DType::f32), "exceeds its storage");
#ifndef BRAID_WITH_CUDA
  // A CPU-only build cannot allocate device memory and says why.
  EXPECT_ERROR_CONTAINS(Tensor::empty({2}, DType::f32, Device::cuda(0)), "without CUDA");
#endif
}

TEST(Tensor, BuffersAreAligned) {
  for (int64_t n : {1, 3, 17, 1000}) {
    Tensor t = Tensor::empty({n});
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % kHostAlignment, 0u) << n;
  }
}

TEST(Views, ShareStorageAndWriteThrough) {
  Tensor base = Tensor::from_vector(std::vector<float>{0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor t = base.transpose(0, 1);
  Tensor n = base.narrow(1, 1, 2);
  Tensor r = base.reshape({3, 2});
  Tensor p = base.permute({1, 0});
  for (const Tensor& v : {t, n, r, p}) EXPECT_EQ(v.storage(), base.storage());
  t.data<float>()[0] = 100.0f;  // element (0, 0) of both
  EXPECT_EQ(base.to_vector()[0], 100.0f);
  n.fill_(-1.0f);  // columns 1 and 2 of base
  EXPECT_EQ(base.to_vector(), (std::vector<float>{100, -1, -1, 3, -1, -1}));
  EXPECT_EQ(r.to_vector(), base.to_vector());
}

TEST(Views, StridesAfterTransposeAndNarrow) {
  Tensor x = Tensor::zeros({2, 3, 4});
  Tensor t = x.transpose(0, 2);
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(t.strides(), (Shape{1, 4, 12}));
  EXPECT_EQ(t.offset(), 0);
  EXPECT_FALSE(t.is_contiguous());
  Tensor n = x.narrow(1, 1, 2);
  EXPECT_EQ(n.shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(n.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(n.offset(), 4);
  EXPECT_FALSE(n.is_contiguous());
  Tensor nn = t.narrow(0, 2, 1);  // narrow of a transposed view: offset in the inner dim
  EXPECT_EQ(nn.offset(), 2);
  EXPECT_EQ(nn.strides(), (Shape{1, 4, 12}));
  // Rows narrowed from the outermost dim stay dense.
  Tensor rows = x.narrow(0, 1, 1);
  EXPECT_TRUE(rows.is_contiguous());
  EXPECT_EQ(rows.offset(), 12);
  // Size-1 dims do not affect contiguity whatever their stride.
  EXPECT_TRUE(x.alias({2, 1, 12}, {12, 999, 1}, 0).is_contiguous());
  // data_ptr points at the view's first element.
  EXPECT_EQ(static_cast<float*>(n.data_ptr()) - static_cast<float*>(x.data_ptr()), 4);
}

TEST(Views, ContiguousCopiesOnlyWhenNeeded) {
  Tensor x = randn({3, 4}, 1);
  Tensor t = x.transpose(0, 1);
  Tensor c = t.contiguous();
  EXPECT_NE(c.storage(), x.storage());
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.strides(), (Shape{3, 1}));
  EXPECT_EQ(c.to_vector(), t.to_vector());
  EXPECT_TRUE(x.contiguous().same(x));
  // clone always copies; detach never does.
  Tensor cl = x.clone();
  EXPECT_NE(cl.storage(), x.storage());
  EXPECT_EQ(cl.to_vector(), x.to_vector());
  Tensor d = x.detach();
  EXPECT_EQ(d.storage(), x.storage());
  EXPECT_FALSE(d.same(x));
}

TEST(Views, DetachAndCloneDropHistory) {
  Tensor x = randn({3}, 2).set_requires_grad(true);
  Tensor y = x.transpose(0, 0);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  EXPECT_FALSE(y.detach().requires_grad());
  EXPECT_TRUE(y.detach().is_leaf());
  EXPECT_FALSE(x.clone().requires_grad());
  EXPECT_FALSE(x.grad().defined());
}

TEST(Copy, AcrossDtypes) {
  Tensor src =
      Tensor::from_vector(std::vector<float>{1.0f, -2.5f, 3.75f, 1e-3f, 65504.0f, 70000.0f}, {6});
  // f32 -> bf16 -> f32 and f32 -> f16 -> f32 round to nearest even, element by element.
  Tensor b = src.to(DType::bf16);
  Tensor h = src.to(DType::f16);
  EXPECT_EQ(b.dtype(), DType::bf16);
  EXPECT_EQ(b.nbytes(), 12u);
  const std::vector<float> bv = b.to_vector(), hv = h.to_vector(), sv = src.to_vector();
  for (size_t i = 0; i < sv.size(); ++i) {
    EXPECT_EQ(bv[i], bf16_to_f32(f32_to_bf16(sv[i]))) << i;
    EXPECT_EQ(hv[i], f16_to_f32(f32_to_f16(sv[i]))) << i;
  }
  EXPECT_TRUE(std::isinf(hv[5]));  // 70000 overflows f16
  // f32 -> integers truncates toward zero, as a C cast.
  Tensor i = src.narrow(0, 0, 4).to(DType::i32);
  EXPECT_EQ(std::vector<int32_t>(i.data<int32_t>(), i.data<int32_t>() + 4),
            (std::vector<int32_t>{1, -2, 3, 0}));
  Tensor u = Tensor::from_vector(std::vector<float>{0, 7, 255}, {3}).to(DType::u8);
  EXPECT_EQ(u.data<uint8_t>()[2], 255);
  EXPECT_EQ(u.to_vector(), (std::vector<float>{0, 7, 255}));
}

TEST(Copy, IntegersDoNotRoundThroughFloat) {
  // 2^24 + 1 is not a float; i32 <-> i64 copies must keep it.
  Tensor a = Tensor::from_vector(std::vector<int32_t>{16777217, -16777219, 2147483647}, {3});
  Tensor b = a.to(DType::i64);
  EXPECT_EQ(b.data<int64_t>()[0], 16777217);
  EXPECT_EQ(b.data<int64_t>()[1], -16777219);
  EXPECT_EQ(b.data<int64_t>()[2], 2147483647);
  Tensor c = Tensor::zeros({3}, DType::i32);
  c.copy_(b);
  EXPECT_EQ(std::memcmp(c.data<int32_t>(), a.data<int32_t>(), 12), 0);
}

TEST(Copy, StridedDestinationAndSource) {
  Tensor src = randn({3, 4}, 3);
  Tensor dst_base = Tensor::zeros({4, 3});
  Tensor dst = dst_base.transpose(0, 1);  // [3, 4] strided
  dst.copy_(src);
  EXPECT_EQ(dst.to_vector(), src.to_vector());
  // Strided source into a bf16 destination: conversion and layout at once.
  Tensor hb = Tensor::zeros({4, 3}, DType::bf16);
  hb.copy_(src.transpose(0, 1));
  const std::vector<float> hv = hb.to_vector(), s = src.to_vector();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(hv[i * 3 + j], bf16_to_f32(f32_to_bf16(s[j * 4 + i])));
  EXPECT_ERROR_CONTAINS(dst.copy_(Tensor::zeros({4, 3})), "differ in shape");
}

TEST(Fill, StridedAndLowPrecision) {
  Tensor x = Tensor::zeros({3, 4});
  x.transpose(0, 1).narrow(0, 1, 2).fill_(5.0f);  // columns 1 and 2
  const std::vector<float> v = x.to_vector();
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) EXPECT_EQ(v[r * 4 + c], (c == 1 || c == 2) ? 5.0f : 0.0f);
  Tensor b = Tensor::zeros({5}, DType::bf16);
  b.fill_(1.0f / 3.0f);
  for (float f : b.to_vector()) EXPECT_EQ(f, bf16_to_f32(f32_to_bf16(1.0f / 3.0f)));
  Tensor i = Tensor::zeros({2, 2}, DType::i32);
  i.fill_(-3.0f);
  EXPECT_EQ(i.data<int32_t>()[3], -3);
}

// Fills past the caches take the streaming path (blocks of non-temporal stores after an
// unaligned head). A view starting one element in, of a length that is no multiple of the
// block or the vector width, must get every element and leave its neighbours alone.
TEST(Fill, LargeDenseFillReachesEveryElementAndNoMore) {
  const int64_t n = (3 << 20) + 5;
  Tensor whole = Tensor::full({n + 2}, 7.0f);
  whole.narrow(0, 1, n).fill_(-2.5f);
  const float* p = whole.data<float>();
  EXPECT_EQ(p[0], 7.0f);
  EXPECT_EQ(p[n + 1], 7.0f);
  int64_t wrong = 0;
  for (int64_t i = 1; i <= n; ++i) wrong += p[i] != -2.5f;
  EXPECT_EQ(wrong, 0);
}

TEST(Storage, WrapsForeignMemoryAndCallsRelease) {
  static float buffer[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  int released = 0;
  {
    auto storage = std::make_shared<Storage>(buffer, sizeof(buffer), Device::cpu(),
                                             [&released](void*) { ++released; });
    Tensor t = Tensor::from_storage(storage, {2, 3}, DType::f32, 2);
    EXPECT_EQ(t.to_vector(), (std::vector<float>{2, 3, 4, 5, 6, 7}));
    EXPECT_EQ(released, 0);
  }
  EXPECT_EQ(released, 1);
}

TEST(Allocator, CurrentAndPeakCounters) {
  const MemoryStats start = host_memory_stats();
  reset_host_peak();
  EXPECT_EQ(host_memory_stats().peak_bytes, start.current_bytes);
  {
    Tensor a = Tensor::empty({1000});  // 4000 bytes
    MemoryStats s = host_memory_stats();
    EXPECT_EQ(s.current_bytes, start.current_bytes + 4000);
    EXPECT_EQ(s.peak_bytes, start.current_bytes + 4000);
    EXPECT_EQ(s.allocations, start.allocations + 1);
    {
      Tensor b = Tensor::empty({500}, DType::bf16);  // 1000 bytes
      EXPECT_EQ(host_memory_stats().current_bytes, start.current_bytes + 5000);
    }
    s = host_memory_stats();
    EXPECT_EQ(s.current_bytes, start.current_bytes + 4000);
    EXPECT_EQ(s.peak_bytes, start.current_bytes + 5000);  // the peak remembers b
    Tensor view = a.narrow(0, 10, 10);                    // views allocate nothing
    EXPECT_EQ(host_memory_stats().allocations, start.allocations + 2);
  }
  const MemoryStats end = host_memory_stats();
  EXPECT_EQ(end.current_bytes, start.current_bytes);
  EXPECT_EQ(end.peak_bytes, start.current_bytes + 5000);
  reset_host_peak();
  EXPECT_EQ(host_memory_stats().peak_bytes, start.current_bytes);
  // An empty tensor allocates nothing.
  Tensor empty = Tensor::empty({0, 5});
  EXPECT_EQ(host_memory_stats().allocations, end.allocations);
  EXPECT_EQ(host_memory_stats().current_bytes, start.current_bytes);
}

// Large blocks start on a 2 MiB boundary, where the kernel can back them with huge pages;
// small ones keep the ordinary 64-byte alignment. A large block freed to the cache and taken
// again keeps its boundary, and its counters stay exact.
TEST(Allocator, LargeBlocksAlignedForHugePages) {
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  const MemoryStats start = host_memory_stats();
  for (int round = 0; round < 2; ++round) {
    Tensor large = Tensor::empty({(int64_t{5} << 20) / 4 + 3});  // 5 MiB + 12 bytes
    EXPECT_EQ(reinterpret_cast<uintptr_t>(large.data_ptr()) % kHugePage, 0u) << "round " << round;
    EXPECT_EQ(host_memory_stats().current_bytes, start.current_bytes + (int64_t{5} << 20) + 12);
  }
  Tensor small = Tensor::empty({1000});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data_ptr()) % kHostAlignment, 0u);
}

// clone_all: every clone equals its source and owns its storage, in the sources' order, for
// a tensor copied over all threads (>= 8 MiB), small ones copied a whole tensor per thread,
// a strided view and another dtype.
TEST(Tensor, CloneAllCopiesEachTensorIntoItsOwnStorage) {
  std::vector<Tensor> sources = {randn({1536, 1536}, 1),  // 9 MiB
                                 randn({7, 3}, 2), randn({300, 301}, 3),
                                 randn({64, 48}, 4).transpose(0, 1),
                                 Tensor::full({1000}, 3.0f).to(DType::bf16)};
  for (int i = 0; i < 40; ++i) sources.push_back(randn({1000 + i}, 10 + i));
  const std::vector<Tensor> clones = clone_all(sources);
  ASSERT_EQ(clones.size(), sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    EXPECT_EQ(clones[i].shape(), sources[i].shape()) << i;
    EXPECT_EQ(clones[i].dtype(), sources[i].dtype()) << i;
    EXPECT_NE(clones[i].data_ptr(), sources[i].data_ptr()) << i;
    EXPECT_EQ(clones[i].to(DType::f32).to_vector(), sources[i].to(DType::f32).to_vector()) << i;
  }
  // Writing a source afterwards leaves its clone alone.
  sources[0].copy_(Tensor::zeros({1536, 1536}));
  EXPECT_NE(clones[0].to_vector()[0], 0.0f);
}

}  // namespace
}  // namespace braid::testing
