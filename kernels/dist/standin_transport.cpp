// The stand-in transport: NCCL's collectives performed over MPI on host copies of the device
// buffers, so NcclProcessGroup (its engine, streams, events and staging) runs where NCCL cannot:
// on the emulated device in CPU CI, or two ranks sharing one GPU.
//
// Each call is enqueued on the group's stream like an NCCL kernel: it waits for what that stream
// holds (cudaStreamSynchronize), copies the device buffer to the host, runs the collective on a
// private MPI process group (the MPI backend's algorithms, hence its reduction order and its
// bf16/f16 handling: widened to f32, rounded once), and copies the result back on the stream.
// The host then waits for the transfer, which is what the emulated device does for every stream
// operation anyway (it runs each when issued). While waiting it polls the group's keep_waiting(),
// so a timed-out group stops waiting (RingAbandoned) and the engine's diagnosis stands; the
// private MPI group's own timeout is set well past the group's so it never speaks first.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "braid/dist/mpi_process_group.h"
#include "cuda_check.cuh"
#include "dist/comm_transport.h"

namespace braid::dist::detail {
namespace {

using Clock = std::chrono::steady_clock;

// The private group's timeout: past the NCCL group's, so that group's watchdog speaks first.
std::chrono::milliseconds host_timeout(std::chrono::milliseconds group_timeout) {
  return group_timeout * 2 + std::chrono::seconds(10);
}

// A host buffer shaped as a flat CPU tensor of `count` elements.
Tensor host_buffer(size_t count, DType dtype) {
  return Tensor::empty({static_cast<int64_t>(count)}, dtype);
}

void to_host(Tensor& host, const void* device, cudaStream_t stream) {
  if (host.nbytes() == 0) return;
  BRAID_CUDA_CHECK(
      cudaMemcpyAsync(host.data_ptr(), device, host.nbytes(), cudaMemcpyDeviceToHost, stream));
  BRAID_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void to_device(void* device, const Tensor& host, cudaStream_t stream) {
  if (host.nbytes() == 0) return;
  BRAID_CUDA_CHECK(
      cudaMemcpyAsync(device, host.data_ptr(), host.nbytes(), cudaMemcpyHostToDevice, stream));
  // The host buffer goes away when the call returns.
  BRAID_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// Waits for a host MPI operation while the group has not failed.
void finish(const WorkPtr& work, const CallContext& ctx, std::string_view call) {
  auto pause = std::chrono::microseconds(1);
  while (!work->is_completed()) {
    if (!ctx.keep_waiting())
      throw RingAbandoned(fmt::format("stand-in {} abandoned: the group failed", call));
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::microseconds(200));
  }
  work->wait();  // throws its error
}

class StandinTransport final : public CommTransport {
 public:
  // `host`: the private MPI group over the same ranks; null for a one-rank group.
  explicit StandinTransport(std::shared_ptr<MpiProcessGroup> host) : host_(std::move(host)) {}

  std::string_view kind() const override { return "stand-in (MPI)"; }

  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                  cudaStream_t stream, const CallContext& ctx) override {
    Tensor h = host_buffer(count, dtype);
    to_host(h, send, stream);
    if (host_) {
      host_->set_timeout(host_timeout(ctx.timeout));
      finish(host_->all_reduce(h, op), ctx, "all_reduce");
    }
    to_device(recv, h, stream);
  }

  void reduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                      cudaStream_t stream, const CallContext& ctx) override {
    Tensor in = host_buffer(count * size(), dtype);
    Tensor out = host_buffer(count, dtype);
    to_host(in, send, stream);
    if (host_) {
      host_->set_timeout(host_timeout(ctx.timeout));
      finish(host_->reduce_scatter(in, out, op), ctx, "reduce_scatter");
    } else {
      out.copy_(in);
    }
    to_device(recv, out, stream);
  }

  void all_gather(const void* send, void* recv, size_t count, DType dtype, cudaStream_t stream,
                  const CallContext& ctx) override {
    Tensor in = host_buffer(count, dtype);
    Tensor out = host_buffer(count * size(), dtype);
    to_host(in, send, stream);
    if (host_) {
      host_->set_timeout(host_timeout(ctx.timeout));
      finish(host_->all_gather(in, out), ctx, "all_gather");
    } else {
      out.copy_(in);
    }
    to_device(recv, out, stream);
  }

  void broadcast(void* buffer, size_t count, DType dtype, int root, cudaStream_t stream,
                 const CallContext& ctx) override {
    Tensor h = host_buffer(count, dtype);
    to_host(h, buffer, stream);
    if (host_) {
      host_->set_timeout(host_timeout(ctx.timeout));
      finish(host_->broadcast(h, root), ctx, "broadcast");
    }
    to_device(buffer, h, stream);
  }

  void send(const void* buffer, size_t count, DType dtype, int peer, cudaStream_t stream,
            const CallContext& ctx) override {
    BRAID_CHECK(host_ != nullptr, "stand-in send: a one-rank group has no peer");
    Tensor h = host_buffer(count, dtype);
    to_host(h, buffer, stream);
    host_->set_timeout(host_timeout(ctx.timeout));
    finish(host_->send(h, peer), ctx, "send");
  }

  void recv(void* buffer, size_t count, DType dtype, int peer, cudaStream_t stream,
            const CallContext& ctx) override {
    BRAID_CHECK(host_ != nullptr, "stand-in recv: a one-rank group has no peer");
    Tensor h = host_buffer(count, dtype);
    host_->set_timeout(host_timeout(ctx.timeout));
    finish(host_->recv(h, peer), ctx, "recv");
    to_device(buffer, h, stream);
  }

  std::string async_error() override { return {}; }

  // A failed host group stays failed; whatever waits on it stops through keep_waiting().
  void abort() override {}

  void finalize(Clock::time_point) override { host_.reset(); }

  std::unique_ptr<CommTransport> split(const ProcessGroupPtr& sub, int, int device,
                                       const std::string& name, Clock::time_point) override {
    if (sub == nullptr) return nullptr;
    return make_standin_transport(sub, device, name);
  }

 private:
  int size() const { return host_ ? host_->size() : 1; }

  std::shared_ptr<MpiProcessGroup> host_;
};

}  // namespace

std::unique_ptr<CommTransport> make_standin_transport(const ProcessGroupPtr& bootstrap, int,
                                                      const std::string& name) {
  if (bootstrap->size() == 1) return std::make_unique<StandinTransport>(nullptr);
  const auto* mpi = dynamic_cast<const MpiProcessGroup*>(bootstrap.get());
  BRAID_CHECK(mpi != nullptr,
              "the stand-in transport of group '{}' needs an MPI bootstrap group for {} ranks, got "
              "a '{}' group",
              name, bootstrap->size(), bootstrap->backend());
  // Collective over the bootstrap group (the constructor duplicates its communicator).
  auto host = std::make_shared<MpiProcessGroup>(mpi->comm(), name + "/stand-in");
  host->set_timeout(host_timeout(bootstrap->timeout()));
  return std::make_unique<StandinTransport>(std::move(host));
}

#ifdef BRAID_SIMT
// The emulated device has no NCCL: the stand-in is its transport.
std::unique_ptr<CommTransport> make_default_transport(const ProcessGroupPtr& bootstrap, int device,
                                                      const std::string& name) {
  return make_standin_transport(bootstrap, device, name);
}
#endif

}  // namespace braid::dist::detail
