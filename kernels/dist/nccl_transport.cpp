// The NCCL transport of NcclProcessGroup: communicator set-up over the bootstrap group, NCCL's
// collectives on the group's stream (non-blocking calls waited out until the deadline), its
// asynchronous errors, abort, finalize and ncclCommSplit.
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include <cstring>
#include <mutex>

#include "braid/core/logging.h"
#include "dist/comm_transport.h"
#include "dist/nccl_support.h"

namespace braid::dist::detail {
namespace {

using Clock = std::chrono::steady_clock;
using nccl::finish_call;

// Rank 0 draws the id and broadcasts it over the bootstrap group. A leading status byte lets the
// other ranks fail at once when rank 0 could not draw one, instead of waiting for a communicator
// that will never form.
ncclUniqueId exchange_unique_id(ProcessGroup& bootstrap, const std::string& name) {
  Tensor buffer = Tensor::zeros({1 + static_cast<int64_t>(sizeof(ncclUniqueId))}, DType::u8);
  auto* bytes = buffer.data<uint8_t>();
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  std::string error;
  if (bootstrap.rank() == 0) {
    const ncclResult_t result = ncclGetUniqueId(&id);
    if (result == ncclSuccess) {
      bytes[0] = 1;
      std::memcpy(bytes + 1, &id, sizeof(id));
    } else {
      error = nccl::describe_status(result);
    }
  }
  bootstrap.broadcast(buffer, 0)->wait();
  BRAID_CHECK(error.empty(), "ncclGetUniqueId for group '{}' failed: {}", name, error);
  BRAID_CHECK(bytes[0] == 1,
              "group '{}': rank 0 of '{}' could not draw the NCCL unique id (its log says why)",
              name, bootstrap.name());
  std::memcpy(&id, bytes + 1, sizeof(id));
  return id;
}

ncclComm_t init_communicator(const ncclUniqueId& id, const ProcessGroup& bootstrap, int device,
                             const std::string& name) {
  const auto timeout = bootstrap.timeout();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // returns at once; polled below so a missing rank cannot hang us
  ncclComm_t comm = nullptr;
  const ncclResult_t result =
      ncclCommInitRankConfig(&comm, bootstrap.size(), id, bootstrap.rank(), &config);
  try {
    finish_call(comm, result, "ncclCommInitRankConfig", Clock::now() + timeout);
  } catch (const std::exception& e) {
    if (comm != nullptr) (void)ncclCommAbort(comm);
    BRAID_FAIL(
        "NCCL communicator of group '{}' ({} ranks; this is rank {} on cuda:{}) could not be "
        "created (timeout {:.1f}s): {}. Every rank of '{}' must call NcclProcessGroup::create, "
        "each on its own device; NCCL_DEBUG=INFO shows how far set-up got",
        name, bootstrap.size(), bootstrap.rank(), device, timeout.count() / 1000.0, e.what(),
        bootstrap.name());
  }
  return comm;
}

class NcclTransport final : public CommTransport {
 public:
  explicit NcclTransport(ncclComm_t comm) : comm_(comm) {}
  ~NcclTransport() override { abort(); }

  std::string_view kind() const override { return "nccl"; }

  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                  cudaStream_t stream, const CallContext& ctx) override {
    std::lock_guard lock(mutex_);
    ncclComm_t comm = live();
    finish_call(comm,
                ncclAllReduce(send, recv, count, nccl::nccl_dtype(dtype), nccl::nccl_reduce_op(op),
                              comm, stream),
                "ncclAllReduce", ctx.deadline);
  }

  void reduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                      cudaStream_t stream, const CallContext& ctx) override {
    std::lock_guard lock(mutex_);
    ncclComm_t comm = live();
    finish_call(comm,
                ncclReduceScatter(send, recv, count, nccl::nccl_dtype(dtype),
                                  nccl::nccl_reduce_op(op), comm, stream),
                "ncclReduceScatter", ctx.deadline);
  }

  void all_gather(const void* send, void* recv, size_t count, DType dtype, cudaStream_t stream,
                  const CallContext& ctx) override {
    std::lock_guard lock(mutex_);
    ncclComm_t comm = live();
    finish_call(comm, ncclAllGather(send, recv, count, nccl::nccl_dtype(dtype), comm, stream),
                "ncclAllGather", ctx.deadline);
  }

  void broadcast(void* buffer, size_t count, DType dtype, int root, cudaStream_t stream,
                 const CallContext& ctx) override {
    std::lock_guard lock(mutex_);
    ncclComm_t comm = live();
    finish_call(comm,
                ncclBroadcast(buffer, buffer, count, nccl::nccl_dtype(dtype), root, comm, stream),
                "ncclBroadcast", ctx.deadline);
  }

  void send(const void* buffer, size_t count, DType dtype, int peer, cudaStream_t stream,
            const CallContext& ctx) override {
    std::lock_guard lock(mutex_);
    ncclComm_t comm = live();
    finish_call(comm, ncclSend(buffer, count, nccl::nccl_dtype(dtype), peer, comm, stream),
                "ncclSend", ctx.deadline);
  }

  void recv(void* buffer, size_t count, DType dtype, int peer, cudaStream_t stream,
            const CallContext& ctx) override {
    std::lock_guard lock(mutex_);
    ncclComm_t comm = live();
    finish_call(comm, ncclRecv(buffer, count, nccl::nccl_dtype(dtype), peer, comm, stream),
                "ncclRecv", ctx.deadline);
  }

  std::string async_error() override {
    // try_lock: a launch holding the communicator is never waited for; the next poll asks again.
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock() || comm_ == nullptr) return {};
    ncclResult_t state = ncclSuccess;
    const ncclResult_t query = ncclCommGetAsyncError(comm_, &state);
    if (query != ncclSuccess) state = query;
    if (state == ncclSuccess || state == ncclInProgress) return {};
    std::string error = "NCCL error " + nccl::describe_status(state);
    const char* last = ncclGetLastError(comm_);
    if (last != nullptr && *last != '\0') error += fmt::format(" ({})", last);
    return error;
  }

  void abort() override {
    std::lock_guard lock(mutex_);
    if (comm_ == nullptr) return;
    // In non-blocking mode the abort may answer ncclInProgress; the handle is gone either way.
    const ncclResult_t aborted = ncclCommAbort(comm_);
    if (aborted != ncclSuccess && aborted != ncclInProgress)
      log().warn("ncclCommAbort: {}", nccl::describe_status(aborted));
    comm_ = nullptr;
  }

  void finalize(Clock::time_point deadline) override {
    std::lock_guard lock(mutex_);
    if (comm_ == nullptr) return;
    // Finalize flushes what NCCL still holds (and may wait for the peers to do the same); a
    // peer that never destroys its side would hold us forever, hence the deadline + abort.
    try {
      finish_call(comm_, ncclCommFinalize(comm_), "ncclCommFinalize", deadline);
      const ncclResult_t destroyed = ncclCommDestroy(comm_);
      if (destroyed != ncclSuccess && destroyed != ncclInProgress)
        log().warn("ncclCommDestroy: {}", nccl::describe_status(destroyed));
    } catch (const std::exception& e) {
      log().warn("{}; aborting the communicator instead", e.what());
      (void)ncclCommAbort(comm_);
    }
    comm_ = nullptr;
  }

  std::unique_ptr<CommTransport> split(const ProcessGroupPtr& sub, int color, int device,
                                       const std::string& name,
                                       Clock::time_point deadline) override {
#if BRAID_NCCL_HAS_COMM_SPLIT
    ncclComm_t child = nullptr;
    {
      std::lock_guard lock(mutex_);
      ncclComm_t comm = live();
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      // Keyed by the new MPI rank, so NCCL's order is MPI's even where keys tie.
      const ncclResult_t result = ncclCommSplit(comm, sub != nullptr ? color : NCCL_SPLIT_NOCOLOR,
                                                sub != nullptr ? sub->rank() : 0, &child, &config);
      try {
        // Non-blocking: the parent reports the call's progress, the child its own set-up.
        finish_call(comm, result, "ncclCommSplit", deadline);
        if (child != nullptr)
          finish_call(child, ncclInProgress, "ncclCommSplit (new communicator)", deadline);
      } catch (...) {
        if (child != nullptr) (void)ncclCommAbort(child);
        throw;
      }
    }
    if (sub == nullptr) return nullptr;
    BRAID_CHECK(child != nullptr, "split into '{}': ncclCommSplit gave rank {} no communicator",
                name, sub->rank());
    int nccl_rank = -1, nccl_size = -1;
    const ncclResult_t rank_status = ncclCommUserRank(child, &nccl_rank);
    const ncclResult_t size_status = ncclCommCount(child, &nccl_size);
    if (rank_status != ncclSuccess || size_status != ncclSuccess || nccl_rank != sub->rank() ||
        nccl_size != sub->size()) {
      (void)ncclCommAbort(child);
      BRAID_FAIL(
          "split into '{}': NCCL placed this rank at {} of {}, MPI at {} of {}; the two "
          "sides disagree",
          name, nccl_rank, nccl_size, sub->rank(), sub->size());
    }
    (void)device;
    return std::make_unique<NcclTransport>(child);
#else
    (void)color, (void)deadline;
    // Older NCCL: the subgroup bootstraps a communicator of its own over its MPI group.
    if (sub == nullptr) return nullptr;
    return make_default_transport(sub, device, name);
#endif
  }

 private:
  ncclComm_t live() const {
    BRAID_CHECK(comm_ != nullptr, "the NCCL communicator was aborted");
    return comm_;
  }

  std::mutex mutex_;  // guards comm_ and every NCCL call on it
  ncclComm_t comm_;
};

}  // namespace

std::unique_ptr<CommTransport> make_default_transport(const ProcessGroupPtr& bootstrap, int device,
                                                      const std::string& name) {
  const ncclUniqueId id = exchange_unique_id(*bootstrap, name);
  return std::make_unique<NcclTransport>(init_communicator(id, *bootstrap, device, name));
}

}  // namespace braid::dist::detail
