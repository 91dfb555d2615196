// Host-side pieces of the NCCL transport that tests can check without a device: dtype and
// reduce-op mapping, NCCL status text and waiting out non-blocking NCCL calls. What does not need
// NCCL itself (argument checks, chunk staging, messages) is in device_group_support.h.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "braid/core/error.h"
#include "braid/core/tensor.h"
#include "braid/dist/process_group.h"
#include "dist/device_group_support.h"

// ncclConfig_t and non-blocking communicators (what bounds communicator set-up by a timeout)
// arrived in NCCL 2.14; CMake leaves the backend out for older libraries, this catches the rest.
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "braid's NCCL backend needs NCCL >= 2.14 (ncclCommInitRankConfig with blocking = 0)"
#endif

// ncclCommSplit arrived in NCCL 2.18; with older libraries a split re-bootstraps over MPI.
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
#define BRAID_NCCL_HAS_COMM_SPLIT 1
#else
#define BRAID_NCCL_HAS_COMM_SPLIT 0
#endif

namespace braid::dist::nccl {

// Every braid dtype has an NCCL twin, so the mapping is total.
ncclDataType_t nccl_dtype(DType dtype);
// avg is ncclAvg: floating types pre-multiply each input by 1/size and sum; integer types sum
// (wrapping like the MPI backend) and divide with truncation toward zero.
ncclRedOp_t nccl_reduce_op(ReduceOp op);

// "ncclInvalidArgument": the enumerator's name, which is what one searches NCCL's docs for.
std::string_view result_name(ncclResult_t result);
// "ncclInvalidArgument (invalid argument (run with NCCL_DEBUG=WARN for details))".
std::string describe_status(ncclResult_t result);

// Waits out ncclInProgress, which a non-blocking communicator returns from any call until the
// call has taken effect (for a collective: until it is enqueued on its stream), by polling
// ncclCommGetAsyncError. Throws braid::Error naming `call` when the result is an error (with
// NCCL's last error text) or when `deadline` passes first.
void finish_call(ncclComm_t comm, ncclResult_t result, std::string_view call,
                 std::chrono::steady_clock::time_point deadline);

}  // namespace braid::dist::nccl

// Checks an NCCL call of a blocking kind (ncclGetUniqueId, ncclCommCount, ...) like every other
// status code: braid::Error with the expression and NCCL's text.
#define BRAID_NCCL_CHECK(expr) \
  BRAID_CHECK_STATUS(expr, ncclSuccess, ::braid::dist::nccl::describe_status)
