// The NCCL backend's host-side helpers: mappings, argument checks, chunk staging, messages.
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

void check_tensor(std::string_view group, std::string_view op, std::string_view what,
                  const Tensor& t, int device) {
  BRAID_CHECK(t.defined(), "{} on group '{}': {} is an undefined tensor", op, group, what);
  BRAID_CHECK(!t.device().is_cpu(),
              "{} on group '{}': {} {} is on cpu, but the NCCL backend handles CUDA tensors only; "
              "CPU tensors go through the MPI backend (an MPI process group such as "
              "braid::dist::environment().world())",
              op, group, what, t.str());
  BRAID_CHECK(t.device().index == device,
              "{} on group '{}': {} {} is on {}, but the group communicates from cuda:{}", op,
              group, what, t.str(), t.device().str(), device);
  BRAID_CHECK(t.is_contiguous(),
              "{} on group '{}': {} {} is not contiguous; the NCCL backend needs a dense tensor "
              "(pass t.contiguous() and copy the result back)",
              op, group, what, t.str());
}

void check_same_dtype(std::string_view group, std::string_view op, const Tensor& input,
                      const Tensor& output) {
  BRAID_CHECK(input.dtype() == output.dtype(),
              "{} on group '{}': input {} and output {} differ in dtype", op, group, input.str(),
              output.str());
}

void check_peer(std::string_view group, std::string_view op, int peer, int rank, int size) {
  BRAID_CHECK(peer >= 0 && peer < size,
              "{} on group '{}': peer {} is not a rank of a group of size {}", op, group, peer,
              size);
  BRAID_CHECK(peer != rank,
              "{} on group '{}': rank {} cannot {} itself over NCCL (the lone transfer would "
              "block the group's stream); copy the tensor instead",
              op, group, rank, op == "recv" ? "receive from" : "send to");
}

ChunkPlan plan_chunks(int64_t total, int parts) {
  BRAID_CHECK(parts > 0 && total >= 0, "plan_chunks: {} elements over {} parts", total, parts);
  ChunkPlan plan;
  plan.total = total;
  plan.parts = parts;
  plan.base = total / parts;
  plan.extra = total % parts;
  plan.padded = plan.base + (plan.extra > 0 ? 1 : 0);
  return plan;
}

namespace {

// The short chunks (base elements each) start right after the `extra` full ones in both
// layouts; only their pitch differs (base in the caller's buffer, padded in the staging one).
struct ShortChunks {
  size_t full_bytes;    // extra * padded elements: the same bytes in both layouts
  size_t width;         // base elements
  size_t packed_pitch;  // base elements
  size_t padded_pitch;  // padded elements
  size_t count;         // parts - extra
};

ShortChunks short_chunks(const ChunkPlan& plan, size_t element_size) {
  return {static_cast<size_t>(plan.extra * plan.padded) * element_size,
          static_cast<size_t>(plan.base) * element_size,
          static_cast<size_t>(plan.base) * element_size,
          static_cast<size_t>(plan.padded) * element_size,
          static_cast<size_t>(plan.parts - plan.extra)};
}

}  // namespace

void pack_chunks(const void* src, void* dst, const ChunkPlan& plan, size_t element_size,
                 cudaStream_t stream) {
  const ShortChunks s = short_chunks(plan, element_size);
  auto* out = static_cast<char*>(dst);
  const auto* in = static_cast<const char*>(src);
  if (s.full_bytes > 0)
    BRAID_CUDA_CHECK(cudaMemcpyAsync(out, in, s.full_bytes, cudaMemcpyDeviceToDevice, stream));
  if (plan.even()) return;
  // The last element of every short slot is padding: zero it (one 2-D memset, a column).
  BRAID_CUDA_CHECK(cudaMemset2DAsync(out + s.full_bytes + s.width, s.padded_pitch, 0, element_size,
                                     s.count, stream));
  if (s.width > 0)
    BRAID_CUDA_CHECK(cudaMemcpy2DAsync(out + s.full_bytes, s.padded_pitch, in + s.full_bytes,
                                       s.packed_pitch, s.width, s.count, cudaMemcpyDeviceToDevice,
                                       stream));
}

void unpack_chunks(const void* src, void* dst, const ChunkPlan& plan, size_t element_size,
                   cudaStream_t stream) {
  const ShortChunks s = short_chunks(plan, element_size);
  auto* out = static_cast<char*>(dst);
  const auto* in = static_cast<const char*>(src);
  if (s.full_bytes > 0)
    BRAID_CUDA_CHECK(cudaMemcpyAsync(out, in, s.full_bytes, cudaMemcpyDeviceToDevice, stream));
  if (plan.even() || s.width == 0) return;
  BRAID_CUDA_CHECK(cudaMemcpy2DAsync(out + s.full_bytes, s.packed_pitch, in + s.full_bytes,
                                     s.padded_pitch, s.width, s.count, cudaMemcpyDeviceToDevice,
                                     stream));
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

namespace {

std::string describe_op(const FailedOp& op) {
  if (op.op == "send" || op.op == "recv")
    return fmt::format("{} {} rank {} ({})", op.op, op.op == "send" ? "to" : "from", op.peer,
                       op.detail);
  return fmt::format("{} seq {} ({})", op.op, op.seq, op.detail);
}

constexpr std::string_view kNoDiagnosis =
    "NCCL cannot tell which ranks never joined; this rank's last collectives are in the "
    "collective log written to the log, and running the same steps with CPU tensors on the MPI "
    "backend names the missing ranks when it times out";

}  // namespace

std::string timeout_message(const FailedOp& op) {
  return fmt::format(
      "collective timed out: group '{}' (nccl, {} ranks) {} did not complete within {:.1f}s on "
      "rank {} (cuda:{}, running for {:.1f}s); the communicator was aborted. {}",
      op.group, op.size, describe_op(op), op.timeout_s, op.rank, op.device, op.elapsed_s,
      kNoDiagnosis);
}

std::string async_error_message(const FailedOp& op, std::string_view error) {
  return fmt::format(
      "group '{}' (nccl, {} ranks) failed on rank {} (cuda:{}) during {}: {}; the communicator "
      "was aborted. {}",
      op.group, op.size, op.rank, op.device, describe_op(op), error, kNoDiagnosis);
}

}  // namespace braid::dist::nccl
