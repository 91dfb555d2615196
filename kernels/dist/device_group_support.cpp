// NcclProcessGroup's host-side helpers: argument checks, chunk staging, failure messages.
#include "dist/device_group_support.h"

#include <fmt/format.h>

#include "braid/core/error.h"
#include "cuda_check.cuh"

namespace braid::dist::nccl {

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

namespace {

std::string describe_op(const FailedOp& op) {
  if (op.op == "send" || op.op == "recv")
    return fmt::format("{} {} rank {} ({})", op.op, op.op == "send" ? "to" : "from", op.peer,
                       op.detail);
  return fmt::format("{} seq {} ({})", op.op, op.seq, op.detail);
}

constexpr std::string_view kNoDiagnosis =
    "The transport cannot tell which ranks caused it; this rank's last collectives are in the "
    "collective log written to the log";

}  // namespace

std::string async_error_message(const FailedOp& op, std::string_view error) {
  return fmt::format(
      "group '{}' ({}, {} ranks) failed on rank {} (cuda:{}) during {}: {}; the communicator "
      "was aborted. {}",
      op.group, op.backend, op.size, op.rank, op.device, describe_op(op), error, kNoDiagnosis);
}

}  // namespace braid::dist::nccl
