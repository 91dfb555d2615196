// Copies and memsets of the emulated runtime: every kind, the pointer checks, and how each moves
// the initialisation shadow.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "runtime_test_util.h"
#include "simt/device_memory.h"

namespace braid::simt {
namespace {

using testing::DeviceBuffer;
using testing::download;
using testing::upload;

class CopyTest : public testing::RuntimeTest {};

std::vector<uint8_t> iota_bytes(size_t n, uint8_t start = 0) {
  std::vector<uint8_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST_F(CopyTest, HostToDeviceAndBackMarksWhatWasWritten) {
  DeviceBuffer d(256);
  const std::vector<uint8_t> host = iota_bytes(100, 7);
  ASSERT_EQ(cudaMemcpy(d.get<char>() + 10, host.data(), 100, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(first_uninitialized(d.get<char>() + 10, 100), nullptr);
  EXPECT_EQ(first_uninitialized(d.get(), 256), d.get());
  EXPECT_EQ(first_uninitialized(d.get<char>() + 10, 101), d.get<char>() + 110);
  // Reading the whole buffer back is allowed, unwritten bytes included (they read as poison).
  const std::vector<uint8_t> back = download<uint8_t>(d.get(), 256);
  for (size_t i = 0; i < 256; ++i)
    EXPECT_EQ(back[i], i >= 10 && i < 110 ? host[i - 10] : 0xff) << i;
  EXPECT_EQ(first_uninitialized(d.get(), 256), d.get());  // reading marks nothing
}

TEST_F(CopyTest, DeviceToDeviceCarriesTheShadow) {
  DeviceBuffer a(256), b(256);
  upload(a.get<char>() + 64, iota_bytes(32));
  ASSERT_EQ(cudaMemcpy(b.get(), a.get(), 256, cudaMemcpyDeviceToDevice), cudaSuccess);
  EXPECT_EQ(first_uninitialized(b.get(), 64), b.get());
  EXPECT_EQ(first_uninitialized(b.get<char>() + 64, 32), nullptr);
  EXPECT_EQ(first_uninitialized(b.get<char>() + 64, 33), b.get<char>() + 96);
  EXPECT_EQ(download<uint8_t>(b.get<char>() + 64, 32), iota_bytes(32));
}

TEST_F(CopyTest, DefaultKindFollowsThePointers) {
  DeviceBuffer a(64), b(64);
  std::vector<uint8_t> host = iota_bytes(64), back(64);
  ASSERT_EQ(cudaMemcpy(a.get(), host.data(), 64, cudaMemcpyDefault), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(b.get(), a.get(), 64, cudaMemcpyDefault), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back.data(), b.get(), 64, cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(back, host);
  std::vector<uint8_t> other(64);
  ASSERT_EQ(cudaMemcpy(other.data(), host.data(), 64, cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(other, host);
  ASSERT_EQ(cudaMemcpy(other.data(), back.data(), 64, cudaMemcpyHostToHost), cudaSuccess);
}

TEST_F(CopyTest, PointersMustMatchTheKind) {
  DeviceBuffer d(64);
  std::vector<uint8_t> host(64);
  EXPECT_EQ(cudaMemcpy(host.data(), host.data() + 32, 16, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d.get(), host.data(), 16, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d.get(), host.data(), 16, cudaMemcpyDeviceToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d.get(), host.data(), 16, cudaMemcpyHostToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d.get(), host.data(), 16, static_cast<cudaMemcpyKind>(5)),
            cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemcpy(d.get(), host.data(), 16, static_cast<cudaMemcpyKind>(-1)),
            cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemcpy(d.get(), nullptr, 16, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d.get(), host.data(), 0, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);  // the last failure, then cleared
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(CopyTest, DeviceRangesMustLieInOneLiveAllocation) {
  DeviceBuffer d(64);
  std::vector<uint8_t> host(128);
  EXPECT_EQ(cudaMemcpy(d.get(), host.data(), 65, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(host.data(), d.get<char>() + 1, 64, cudaMemcpyDeviceToHost),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset(d.get<char>() + 60, 0, 5), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset(host.data(), 0, 5), cudaErrorInvalidValue);
  void* freed = nullptr;
  ASSERT_EQ(cudaMalloc(&freed, 64), cudaSuccess);
  ASSERT_EQ(cudaFree(freed), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(freed, host.data(), 8, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  // Overlapping device areas are refused (CUDA leaves them undefined).
  EXPECT_EQ(cudaMemcpy(d.get<char>() + 8, d.get(), 16, cudaMemcpyDeviceToDevice),
            cudaErrorInvalidValue);
}

TEST_F(CopyTest, MemsetWritesAndMarks) {
  DeviceBuffer d(128);
  ASSERT_EQ(cudaMemset(d.get<char>() + 5, 0x1234, 50), cudaSuccess);  // the low byte, 0x34
  EXPECT_EQ(first_uninitialized(d.get<char>() + 5, 50), nullptr);
  EXPECT_EQ(first_uninitialized(d.get(), 128), d.get());
  const std::vector<uint8_t> back = download<uint8_t>(d.get(), 128);
  for (size_t i = 0; i < 128; ++i) EXPECT_EQ(back[i], i >= 5 && i < 55 ? 0x34 : 0xff) << i;
  ASSERT_EQ(cudaMemsetAsync(d.get(), 0, 128, nullptr), cudaSuccess);
  EXPECT_EQ(first_uninitialized(d.get(), 128), nullptr);
}

TEST_F(CopyTest, TwoDimensionalCopiesAndMemsetsTouchOnlyTheirRows) {
  // 4 rows of 10 bytes at a pitch of 16.
  DeviceBuffer d(64), e(64);
  const std::vector<uint8_t> host = iota_bytes(40);
  ASSERT_EQ(cudaMemcpy2DAsync(d.get(), 16, host.data(), 10, 10, 4, cudaMemcpyHostToDevice),
            cudaSuccess);
  const std::vector<uint8_t> back = download<uint8_t>(d.get(), 64);
  for (size_t r = 0; r < 4; ++r)
    for (size_t c = 0; c < 16; ++c) {
      const size_t i = r * 16 + c;
      EXPECT_EQ(back[i], c < 10 ? host[r * 10 + c] : 0xff) << i;
      EXPECT_EQ(first_uninitialized(d.get<char>() + i, 1) == nullptr, c < 10) << i;
    }
  ASSERT_EQ(cudaMemset2DAsync(e.get(), 16, 0, 3, 4), cudaSuccess);
  for (size_t i = 0; i < 64; ++i)
    EXPECT_EQ(first_uninitialized(e.get<char>() + i, 1) == nullptr, i < 51 && i % 16 < 3) << i;
  // Rows wider than a pitch, a pitch past memPitch, an area past the allocation.
  EXPECT_EQ(cudaMemcpy2DAsync(d.get(), 8, host.data(), 10, 10, 2, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(
      cudaMemcpy2DAsync(d.get(), size_t{1} << 31, host.data(), 10, 10, 1, cudaMemcpyHostToDevice),
      cudaErrorInvalidPitchValue);
  EXPECT_EQ(cudaMemcpy2DAsync(d.get(), 16, host.data(), 10, 10, 5, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy2DAsync(d.get(), 16, host.data(), 10, 10, 4, cudaMemcpyDeviceToHost),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset2DAsync(e.get(), 2, 0, 3, 2), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset2DAsync(e.get(), 2, 0, 3, 1), cudaSuccess);  // pitch unused for one row
  EXPECT_EQ(cudaMemset2DAsync(e.get(), 16, 0, 16, 5), cudaErrorInvalidValue);
}

TEST_F(CopyTest, AsyncCopiesRunInStreamOrder) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  DeviceBuffer d(1024);
  std::vector<float> host(256, 2.5f), back(256, 0.0f);
  ASSERT_EQ(cudaMemcpyAsync(d.get(), host.data(), 1024, cudaMemcpyHostToDevice, stream),
            cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d.get<char>() + 512, 0, 512, stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(back.data(), d.get(), 1024, cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  for (size_t i = 0; i < 256; ++i) EXPECT_EQ(back[i], i < 128 ? 2.5f : 0.0f) << i;
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(back.data(), d.get(), 4, cudaMemcpyDeviceToHost, stream),
            cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaMemsetAsync(d.get(), 0, 4, stream), cudaErrorInvalidResourceHandle);
}

TEST_F(CopyTest, StreamOrderedAllocation) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  void* p = nullptr;
  ASSERT_EQ(cudaMallocAsync(&p, 1000, stream), cudaSuccess);
  ASSERT_NE(find_allocation(p, 1000), nullptr);
  EXPECT_EQ(cudaFreeAsync(p, stream), cudaSuccess);
  EXPECT_EQ(find_allocation(p), nullptr);
  EXPECT_EQ(cudaFreeAsync(p, stream), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMallocAsync(nullptr, 8, stream), cudaErrorInvalidValue);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cudaMallocAsync(&p, 8, stream), cudaErrorInvalidResourceHandle);
}

}  // namespace
}  // namespace braid::simt
