// Streams and events on a CUDA device (or the SIMT emulator): the compute stream is what
// kernels run on and is not the legacy default stream, op copies stay off that stream and
// correct, and events order work between the compute and copy streams.
#include <gtest/gtest.h>

#include <vector>

#include "braid/core/stream.h"
#include "braid/core/tensor.h"
#include "braid/ops/kernel_signatures.h"
#include "support/test_util.h"

#ifdef BRAID_WITH_CUDA
#include "cuda_runtime.cuh"
#include "elementwise/binary.cuh"
#endif
#ifdef BRAID_SIMT
#include "simt/emulated_device.h"
#endif

#ifndef BRAID_WITH_CUDA

TEST(CudaStreams, NotBuilt) {
  GTEST_SKIP() << "braid was built without CUDA";
}

#else

namespace braid {
namespace {

// Elements per test tensor: on a device large enough that a kernel still runs when a copy
// that forgot its event would start (so the test can fail there); small on the emulator, whose
// operations all complete as they are issued.
#ifdef BRAID_SIMT
constexpr int64_t kNumel = 4096 + 7;
#else
constexpr int64_t kNumel = (int64_t{16} << 20) + 7;
#endif

TEST(CudaStreams, TheComputeStreamIsCurrentAndNotTheLegacyDefault) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::ensure_registered();
  const Device gpu = Device::cuda();
  cuda::DeviceGuard guard(0);
  cudaStream_t compute = cuda::current_stream();
  EXPECT_NE(compute, nullptr);
  EXPECT_NE(compute, cudaStreamLegacy);
  EXPECT_NE(compute, cudaStreamPerThread);
  EXPECT_EQ(compute, cuda::current_stream());  // one per device, kept
  EXPECT_EQ(compute, Stream::compute(gpu).native());
  EXPECT_EQ(compute, cuda::device_stream(0, StreamRole::compute));
  void* copy = Stream::copy(gpu).native();
  void* comm = Stream::comm(gpu).native();
  EXPECT_NE(copy, nullptr);
  EXPECT_NE(comm, nullptr);
  EXPECT_NE(copy, static_cast<void*>(compute));
  EXPECT_NE(comm, static_cast<void*>(compute));
  EXPECT_NE(copy, comm);
#ifndef BRAID_SIMT
  // Non-blocking: no implicit synchronisation with the legacy stream (the emulator runs every
  // operation at once and has no flags to ask).
  for (cudaStream_t s :
       {compute, static_cast<cudaStream_t>(copy), static_cast<cudaStream_t>(comm)}) {
    unsigned flags = 0;
    ASSERT_EQ(cudaStreamGetFlags(s, &flags), cudaSuccess);
    EXPECT_EQ(flags & cudaStreamNonBlocking, cudaStreamNonBlocking);
  }
#endif
}

TEST(CudaStreams, OpCopiesAreCorrectAndStayOffTheLegacyStream) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::ensure_registered();
  const Device gpu = Device::cuda();
#ifdef BRAID_SIMT
  const uint64_t legacy_before = simt::runtime_call_counts().legacy_stream_ops;
#endif
  const Tensor a = testing::randn({kNumel}, 1);
  const Tensor b = testing::randn({kNumel}, 2);
  const Tensor a_dev = a.to(gpu), b_dev = b.to(gpu);
  Tensor sum_dev = Tensor::empty({kNumel}, DType::f32, gpu);
  cuda::binary(ops::BinaryOp::add, a_dev, b_dev, sum_dev);
  // Right after the kernel: the device-to-host copy must wait for it, on the compute stream.
  const std::vector<float> got = sum_dev.to(Device::cpu()).to_vector();
  const std::vector<float> av = a.to_vector(), bv = b.to_vector();
  for (int64_t i = 0; i < kNumel; ++i) ASSERT_EQ(got[i], av[i] + bv[i]) << "element " << i;
#ifdef BRAID_SIMT
  EXPECT_EQ(simt::runtime_call_counts().legacy_stream_ops, legacy_before);
#endif
}

TEST(CudaStreams, AnEventOrdersComputeWorkBeforeACopyStreamCopy) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::ensure_registered();
  const Device gpu = Device::cuda();
  const Stream compute = Stream::compute(gpu), copy = Stream::copy(gpu);
  const Tensor a = testing::randn({kNumel}, 3);
  const Tensor a_dev = a.to(gpu);
  Tensor doubled = Tensor::empty({kNumel}, DType::f32, gpu);
  cuda::binary(ops::BinaryOp::add, a_dev, a_dev, doubled);  // issued on the compute stream
  Event computed;
  computed.record(compute);
  copy.wait(computed);
  std::vector<float> host(kNumel, -1.0f);
  copy_async(host.data(), Device::cpu(), doubled.data_ptr(), gpu, doubled.nbytes(), copy);
  record_stream(*doubled.storage(), copy);
  Event copied;
  copied.record(copy);
  copied.synchronize();
  EXPECT_TRUE(copied.done());
  const std::vector<float> av = a.to_vector();
  for (int64_t i = 0; i < kNumel; ++i) ASSERT_EQ(host[i], av[i] + av[i]) << "element " << i;
}

TEST(CudaStreams, AnEventOrdersACopyStreamUploadBeforeComputeWork) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::ensure_registered();
  const Device gpu = Device::cuda();
  const Stream compute = Stream::compute(gpu), copy = Stream::copy(gpu);
  const Tensor a = testing::randn({kNumel}, 4);
  // Staged on the copy stream into memory of the compute stream's pool (a batch ahead).
  Tensor staged = Tensor::empty({kNumel}, DType::f32, gpu);
  copy_async(staged.data_ptr(), gpu, a.data_ptr(), Device::cpu(), a.nbytes(), copy);
  Event uploaded;
  uploaded.record(copy);
  compute.wait(uploaded);
  Tensor doubled = Tensor::empty({kNumel}, DType::f32, gpu);
  cuda::binary(ops::BinaryOp::add, staged, staged, doubled);
  compute.synchronize();
  EXPECT_TRUE(compute.done());
  const std::vector<float> got = doubled.to(Device::cpu()).to_vector();
  const std::vector<float> av = a.to_vector();
  for (int64_t i = 0; i < kNumel; ++i) ASSERT_EQ(got[i], av[i] + av[i]) << "element " << i;
}

TEST(CudaStreams, EventsAndStreamsReportCompletion) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::ensure_registered();
  const Device gpu = Device::cuda();
  Event never;
  EXPECT_TRUE(never.done());  // nothing recorded: nothing to wait for
  EXPECT_EQ(never.native(), nullptr);
  Stream::copy(gpu).wait(never);  // a no-op, not an error
  Event e;
  e.record(Stream::comm(gpu));
  EXPECT_NE(e.native(), nullptr);
  EXPECT_EQ(e.device(), gpu);
  e.synchronize();
  EXPECT_TRUE(e.done());
  Stream::comm(gpu).synchronize();
  EXPECT_TRUE(Stream::comm(gpu).done());
  Event moved = std::move(e);
  EXPECT_EQ(e.native(), nullptr);
  EXPECT_TRUE(moved.done());
}

TEST(CudaStreams, CopyAsyncNeedsAStreamOfTheCopysDevice) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::ensure_registered();
  std::vector<float> host(4, 1.0f);
  Tensor t = Tensor::empty({4}, DType::f32, Device::cuda());
  EXPECT_ERROR_CONTAINS(
      copy_async(t.data_ptr(), t.device(), host.data(), Device::cpu(), 16, Stream()),
      "the stream must belong to a device of the copy");
}

}  // namespace
}  // namespace braid

#endif  // BRAID_WITH_CUDA
