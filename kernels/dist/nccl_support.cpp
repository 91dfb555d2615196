// The NCCL transport's host-side helpers: mappings, status text, waiting out non-blocking calls.
#include "dist/nccl_support.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "cuda_check.cuh"

namespace braid::dist::nccl {

ncclDataType_t nccl_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return ncclFloat32;
    case DType::bf16:
      return ncclBfloat16;
    case DType::f16:
      return ncclFloat16;
    case DType::i32:
      return ncclInt32;
    case DType::i64:
      return ncclInt64;
    case DType::u8:
      return ncclUint8;
  }
  BRAID_FAIL("dtype {} has no NCCL type", static_cast<int>(dtype));
}

ncclRedOp_t nccl_reduce_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::avg:
      return ncclAvg;
    case ReduceOp::max:
      return ncclMax;
    case ReduceOp::min:
      return ncclMin;
  }
  BRAID_FAIL("unknown reduce op {}", static_cast<int>(op));
}

std::string_view result_name(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "ncclSuccess";
    case ncclUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case ncclSystemError:
      return "ncclSystemError";
    case ncclInternalError:
      return "ncclInternalError";
    case ncclInvalidArgument:
      return "ncclInvalidArgument";
    case ncclInvalidUsage:
      return "ncclInvalidUsage";
    case ncclRemoteError:
      return "ncclRemoteError";
    case ncclInProgress:
      return "ncclInProgress";
    default:
      return "ncclResult(unknown)";
  }
}

std::string describe_status(ncclResult_t result) {
  return fmt::format("{} ({})", result_name(result), ncclGetErrorString(result));
}

void finish_call(ncclComm_t comm, ncclResult_t result, std::string_view call,
                 std::chrono::steady_clock::time_point deadline) {
  // Polling starts fast (enqueueing usually takes microseconds) and backs off to 1 ms, which
  // bounds the cost of a slow connection set-up without delaying the common case.
  auto pause = std::chrono::microseconds(1);
  while (result == ncclInProgress) {
    if (std::chrono::steady_clock::now() > deadline) {
      BRAID_FAIL(
          "{} did not take effect before the timeout (still ncclInProgress): a peer that "
          "never made the matching call, or a network NCCL cannot connect over "
          "(NCCL_DEBUG=INFO shows the transport)",
          call);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(1));
    const ncclResult_t query = ncclCommGetAsyncError(comm, &result);
    BRAID_CHECK(query == ncclSuccess, "ncclCommGetAsyncError after {} failed: {}", call,
                describe_status(query));
  }
  if (result != ncclSuccess) {
    const char* last = comm != nullptr ? ncclGetLastError(comm) : nullptr;
    BRAID_FAIL("{} failed: {}{}{}", call, describe_status(result),
               last != nullptr && *last != '\0' ? "; NCCL: " : "", last != nullptr ? last : "");
  }
}

}  // namespace braid::dist::nccl
