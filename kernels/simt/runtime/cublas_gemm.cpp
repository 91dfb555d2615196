// The emulated cublasSgemmStridedBatched: cuBLAS's documented argument checks, then every memory
// access checked as a kernel's would be (bounds per allocation, initialisation, alignment,
// batches or operands that overlap the output), then a float64 reference product rounded once.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cublas_handle.h"
#include "runtime_state.h"
#include "simt/device_memory.h"
#include "simt/fault.h"

namespace braid::simt::cublas {
namespace {

constexpr const char* kCall = "cublasSgemmStridedBatched";
constexpr uint64_t kFloat = sizeof(float);

// Not a kernel launch, so not the launcher's fault(): the same wording, naming the call.
[[noreturn]] void fail(const char* kind, const std::string& details) {
  throw KernelFault(fmt::format("simt: {} in {}: {}", kind, kCall, details));
}

// One operand as stored: rows x cols, column-major, columns `ld` elements apart, batches
// `stride` elements apart.
struct Operand {
  const char* name;
  uintptr_t base;
  int rows, cols, ld;
  long long stride;

  // The address of element (r, c) of batch b, in the device's modular address arithmetic: any
  // argument gives an address the checks can reject, never an overflow.
  uintptr_t at(int b, int r, int c) const {
    return base + kFloat * (static_cast<uint64_t>(b) * static_cast<uint64_t>(stride) +
                            static_cast<uint64_t>(c) * static_cast<uint64_t>(ld) +
                            static_cast<uint64_t>(r));
  }
  float load(int b, int r, int c) const {
    float v;
    std::memcpy(&v, reinterpret_cast<const void*>(at(b, r, c)), sizeof v);
    return v;
  }
};

struct Problem {
  Operand a, b, c;
  bool trans_a, trans_b;
  int m, n, k, batches;
  float alpha, beta;
};

const void* ptr(uintptr_t address) {
  return reinterpret_cast<const void*>(address);
}

// Why [address, address + bytes) is not inside one live allocation.
std::string describe_range(uintptr_t address, uint64_t bytes) {
  const std::string range = fmt::format("[{:#x}, +{} bytes)", address, bytes);
  if (address < 4096) return range + " is at a null pointer";
  if (!in_device_arena(ptr(address)))
    return range + " is not device memory (a host pointer, or outside the device's memory)";
  if (const Allocation* a = find_allocation(ptr(address), 1))
    return fmt::format("{} runs {} bytes past the end of allocation #{} ({} bytes at {})", range,
                       address + bytes - reinterpret_cast<uintptr_t>(a->base) - a->bytes, a->id,
                       a->bytes, static_cast<const void*>(a->base));
  return range + " lies in no live allocation (freed, never allocated, or past an allocation)";
}

// Checks one stored column of batch b that the product reads (`read`) or only writes.
void check_column(const Operand& op, int b, int col, bool read) {
  const uintptr_t first = op.at(b, 0, col);
  const uint64_t bytes = kFloat * static_cast<uint64_t>(op.rows);
  const Allocation* a = find_allocation(ptr(first), bytes);
  if (a == nullptr)
    fail("out-of-bounds global memory access",
         fmt::format("{} of batch {}, column {} ({}): {}", op.name, b, col,
                     read ? "read" : "written", describe_range(first, bytes)));
  if (!read) return;
  if (const void* unset = first_uninitialized(ptr(first), bytes)) {
    const uint64_t offset =
        reinterpret_cast<uintptr_t>(unset) - reinterpret_cast<uintptr_t>(a->base);
    fail("uninitialised global memory read",
         fmt::format("{} of batch {}, element (row {}, column {}) at byte {} of allocation #{} "
                     "({} bytes) was never written",
                     op.name, b, (reinterpret_cast<uintptr_t>(unset) - first) / kFloat, col, offset,
                     a->id, a->bytes));
  }
}

void check_aligned(const Operand& op) {
  if (op.base % alignof(float) != 0)
    fail("misaligned access", fmt::format("{} at {:#x} is not aligned to the {} bytes of a float",
                                          op.name, op.base, alignof(float)));
}

// A GPU computes every batch and output tile at once, so two batches writing one element of C,
// or an input element that is also an output element, are data races.
void check_overlaps(const Problem& p, bool reads_ab) {
  const Operand& c = p.c;
  const uint64_t extent = kFloat * (static_cast<uint64_t>(p.n - 1) * c.ld + p.m);
  uintptr_t lo = c.at(0, 0, 0), hi = lo + extent;
  for (int b = 1; b < p.batches; ++b) {
    lo = std::min(lo, c.at(b, 0, 0));
    hi = std::max(hi, c.at(b, 0, 0) + extent);
  }
  const auto stride = static_cast<uint64_t>(c.stride);
  const uint64_t magnitude = c.stride < 0 ? uint64_t{0} - stride : stride;
  const bool c_may_overlap = p.batches > 1 && kFloat * magnitude < extent;
  auto touches_c = [&](const Operand& op) {
    for (int b = 0; b < p.batches; ++b)
      for (int col = 0; col < op.cols; ++col) {
        const uintptr_t first = op.at(b, 0, col);
        if (first < hi && first + kFloat * op.rows > lo) return true;
      }
    return false;
  };
  const bool a_hits = reads_ab && touches_c(p.a), b_hits = reads_ab && touches_c(p.b);
  if (!c_may_overlap && !a_hits && !b_hits) return;
  // One bit per element between C's lowest and highest address; a C whose batches lie more than
  // 2^32 elements apart (different allocations) is not checked.
  if ((hi - lo) / kFloat > (uint64_t{1} << 32)) return;

  std::vector<uint64_t> written((hi - lo) / kFloat / 64 + 1, 0);
  for (int b = 0; b < p.batches; ++b)
    for (int j = 0; j < p.n; ++j)
      for (int i = 0; i < p.m; ++i) {
        const uint64_t e = (c.at(b, i, j) - lo) / kFloat;
        if (written[e / 64] >> (e % 64) & 1)
          fail("data race on global memory",
               fmt::format("C element (row {}, column {}) of batch {} is also written by another "
                           "batch: the outputs overlap (ldc {}, strideC {})",
                           i, j, b, c.ld, c.stride));
        written[e / 64] |= uint64_t{1} << (e % 64);
      }
  for (const Operand* op : {a_hits ? &p.a : nullptr, b_hits ? &p.b : nullptr}) {
    if (op == nullptr) continue;
    for (int b = 0; b < p.batches; ++b)
      for (int col = 0; col < op->cols; ++col)
        for (int r = 0; r < op->rows; ++r) {
          const uintptr_t address = op->at(b, r, col);
          if (address < lo || address >= hi) continue;
          const uint64_t e = (address - lo) / kFloat;
          if (written[e / 64] >> (e % 64) & 1)
            fail("data race on global memory",
                 fmt::format("{} element (row {}, column {}) of batch {} is an element of C, "
                             "which the call writes: an input overlaps the output",
                             op->name, r, col, b));
        }
  }
}

void run(const Problem& p) {
  // Reference BLAS: with alpha == 0 or k == 0, A and B are not read, and with beta == 1 as well
  // C is left alone; with beta == 0, C is not read (it may hold NaN or never have been written).
  const bool reads_ab = p.alpha != 0.0f && p.k > 0;
  if (!reads_ab && p.beta == 1.0f) return;
  const bool reads_c = p.beta != 0.0f;

  DeviceAccess access;
  if (reads_ab) {
    check_aligned(p.a);
    check_aligned(p.b);
  }
  check_aligned(p.c);
  // Every access is checked before anything is written, so a fault leaves C as it was.
  for (int b = 0; b < p.batches; ++b) {
    if (reads_ab) {
      for (int col = 0; col < p.a.cols; ++col) check_column(p.a, b, col, true);
      for (int col = 0; col < p.b.cols; ++col) check_column(p.b, b, col, true);
    }
    for (int col = 0; col < p.c.cols; ++col) check_column(p.c, b, col, reads_c);
  }
  check_overlaps(p, reads_ab);

  const double alpha = p.alpha, beta = p.beta;
  std::vector<double> op_a(reads_ab ? static_cast<size_t>(p.m) * p.k : 0);
  std::vector<double> op_b(reads_ab ? static_cast<size_t>(p.k) * p.n : 0);
  for (int b = 0; b < p.batches; ++b) {
    if (reads_ab) {
      // op(A)(i, l) and op(B)(l, j), widened once.
      for (int i = 0; i < p.m; ++i)
        for (int l = 0; l < p.k; ++l)
          op_a[static_cast<size_t>(i) * p.k + l] =
              p.trans_a ? p.a.load(b, l, i) : p.a.load(b, i, l);
      for (int l = 0; l < p.k; ++l)
        for (int j = 0; j < p.n; ++j)
          op_b[static_cast<size_t>(l) * p.n + j] =
              p.trans_b ? p.b.load(b, j, l) : p.b.load(b, l, j);
    }
    for (int j = 0; j < p.n; ++j) {
      for (int i = 0; i < p.m; ++i) {
        double value = 0.0;
        if (reads_ab) {
          double dot = 0.0;
          for (int l = 0; l < p.k; ++l)
            dot += op_a[static_cast<size_t>(i) * p.k + l] * op_b[static_cast<size_t>(l) * p.n + j];
          value = alpha * dot;
        }
        if (reads_c) value += beta * static_cast<double>(p.c.load(b, i, j));
        const float rounded = static_cast<float>(value);  // the one rounding
        std::memcpy(reinterpret_cast<void*>(p.c.at(b, i, j)), &rounded, sizeof rounded);
      }
      mark_initialized(ptr(p.c.at(b, 0, j)), kFloat * static_cast<uint64_t>(p.m));
    }
  }
}

bool valid_operation(cublasOperation_t op) {
  return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;  // C is T for real types
}

}  // namespace
}  // namespace braid::simt::cublas

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float* alpha, const float* A, int lda,
                                         long long int strideA, const float* B, int ldb,
                                         long long int strideB, const float* beta, float* C,
                                         int ldc, long long int strideC, int batchCount) {
  namespace cb = braid::simt::cublas;
  namespace rt = braid::simt::rt;
  cb::cublasContext h;
  if (!cb::find_handle(handle, &h)) return CUBLAS_STATUS_NOT_INITIALIZED;
  // cuBLAS's CUBLAS_STATUS_INVALID_VALUE cases for gemm, in its documented order.
  if (!cb::valid_operation(transa) || !cb::valid_operation(transb))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m < 0 || n < 0 || k < 0 || batchCount < 0) return CUBLAS_STATUS_INVALID_VALUE;
  const bool trans_a = transa != CUBLAS_OP_N, trans_b = transb != CUBLAS_OP_N;
  if (lda < std::max(1, trans_a ? k : m) || ldb < std::max(1, trans_b ? n : k) ||
      ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0 || batchCount == 0) return CUBLAS_STATUS_SUCCESS;
  if (C == nullptr) return CUBLAS_STATUS_INVALID_VALUE;

  cb::Problem p;
  p.a = {"A", reinterpret_cast<uintptr_t>(A), trans_a ? k : m, trans_a ? m : k, lda, strideA};
  p.b = {"B", reinterpret_cast<uintptr_t>(B), trans_b ? n : k, trans_b ? k : n, ldb, strideB};
  p.c = {"C", reinterpret_cast<uintptr_t>(C), m, n, ldc, strideC};
  p.trans_a = trans_a;
  p.trans_b = trans_b;
  p.m = m;
  p.n = n;
  p.k = k;
  p.batches = batchCount;
  // Host pointer mode: the scalars are read now, on the host, as the library reads them (a
  // device pointer here faults, as it does with the library).
  p.alpha = *alpha;
  p.beta = *beta;
  // The stream's launch failing (a dead stream, a device left unusable) is an execution failure.
  const cudaError_t issued = rt::issue(h.stream, [&] { cb::run(p); });
  if (issued != cudaSuccess) {
    rt::record(issued);
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  return CUBLAS_STATUS_SUCCESS;
}
