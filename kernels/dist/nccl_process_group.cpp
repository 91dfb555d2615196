// NcclProcessGroup: the device side of the shared operation engine (op_engine.h). One helper,
// launch(), turns every operation into an engine op: the caller's stream -> group stream event,
// start and done events around the transport's calls, completion when the done event is.
#include "dist/nccl_process_group.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <functional>
#include <optional>
#include <type_traits>

#include "braid/core/logging.h"
#include "braid/dist/collective_log.h"
#include "cuda_check.cuh"
#include "cuda_runtime.cuh"
#include "dist/comm_transport.h"
#include "dist/device_group_support.h"
#include "dist/mpi_runtime.h"
#include "dist/op_engine.h"

namespace braid::dist {
namespace detail {

using Clock = std::chrono::steady_clock;

// A CUDA event shared by an operation and its Work: wait() may still need it after the engine
// retired the operation.
using EventPtr = std::shared_ptr<std::remove_pointer_t<cudaEvent_t>>;

EventPtr make_event() {
  cudaEvent_t event = nullptr;
  BRAID_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return EventPtr(event, [](cudaEvent_t e) { (void)cudaEventDestroy(e); });
}

// cudaEventQuery; "not ready" is an answer, not an error, and must not linger as the thread's
// last error, where the next kernel launch check (cudaGetLastError) would report it.
cudaError_t query_event(cudaEvent_t event) {
  const cudaError_t status = cudaEventQuery(event);
  if (status == cudaErrorNotReady && cudaPeekAtLastError() == cudaErrorNotReady)
    (void)cudaGetLastError();
  return status;
}

// What the group's operations share: the transport, the group's stream and the barrier word.
struct DeviceGroup {
  std::shared_ptr<CommTransport> transport;
  cudaStream_t stream = nullptr;
  void* barrier = nullptr;  // one int32 that barrier() sums in place forever, so it stays zero
  int device = 0;
  std::string name;
  int rank = 0;
  int size = 1;
};

// An operation's transport calls, on the group's stream.
using Body =
    std::function<void(CommTransport& transport, cudaStream_t stream, const CallContext& ctx)>;

class NcclWorkImpl final : public NcclWork {
 public:
  NcclWorkImpl(std::shared_ptr<EngineWork> inner, EventPtr done, int device, bool blocking_wait)
      : inner_(std::move(inner)),
        done_(std::move(done)),
        device_(device),
        blocking_wait_(blocking_wait) {}

  // Orders the caller's stream after the operation (barrier: blocks the host).
  void wait() override {
    if (auto error = inner_->error()) std::rethrow_exception(error);
    if (blocking_wait_) return synchronize();
    if (inner_->is_completed()) return;
    cuda::DeviceGuard guard(device_);
    BRAID_CUDA_CHECK(cudaStreamWaitEvent(cuda::current_stream(), done_.get(), 0));
    if (auto error = inner_->error()) std::rethrow_exception(error);
  }
  bool is_completed() override {
    return inner_->is_completed() || query_event(done_.get()) == cudaSuccess;
  }
  std::exception_ptr error() const override { return inner_->error(); }
  void synchronize() override { inner_->wait(); }

 private:
  std::shared_ptr<EngineWork> inner_;
  EventPtr done_;
  const int device_;
  const bool blocking_wait_;
};

struct OpSpec {
  OpKind kind = OpKind::none;
  int peer = -1;
  int tag = 0;
  std::function<std::string()> describe;
  DType dtype = DType::u8;
  int64_t numel = 0;
  std::chrono::milliseconds timeout{0};
  bool blocking_wait = false;  // barrier: wait() blocks the host
};

nccl::FailedOp failed_op(const DeviceGroup& g, const OpSpec& spec, int64_t seq,
                         std::string detail) {
  nccl::FailedOp f;
  f.group = g.name;
  f.size = g.size;
  f.rank = g.rank;
  f.device = g.device;
  f.op = std::string(op_kind_name(spec.kind));
  f.seq = seq;
  f.peer = spec.peer;
  f.detail = std::move(detail);
  f.timeout_s = spec.timeout.count() / 1000.0;
  f.elapsed_s = -1;
  f.backend = std::string(g.transport->kind());
  return f;
}

// The one helper every operation goes through. At issue, on the caller's thread: an event on the
// caller's stream that the group's stream waits for, a start event, the transport's calls, a done
// event (all on the group's stream). Then the engine polls the done event; the timeout clock
// starts once the stream reached the start event. A failed launch or an asynchronous transport
// error fails the group (the peers may have launched their side).
WorkPtr launch(OpEngine& engine, const std::shared_ptr<DeviceGroup>& group, OpSpec spec,
               std::vector<Tensor> keep_alive, Body body) {
  cuda::DeviceGuard guard(group->device);
  EventPtr start = make_event();
  EventPtr done = make_event();
  auto op = std::make_unique<EngineOp>();
  op->kind = spec.kind;
  op->peer = spec.peer;
  op->tag = spec.tag;
  op->dtype = spec.dtype;
  op->numel = spec.numel;
  op->describe = spec.describe;
  op->timeout = spec.timeout;
  op->post_at_issue = true;
  op->error_fails_group = true;
  const cudaStream_t caller = cuda::current_stream();
  op->post = [group, start, done, caller, body = std::move(body), keep = std::move(keep_alive),
              timeout = spec.timeout, kind = spec.kind](const KeepWaiting& keep_waiting) {
    cuda::DeviceGuard device(group->device);
    EventPtr ready = make_event();
    BRAID_CUDA_CHECK(cudaEventRecord(ready.get(), caller));
    BRAID_CUDA_CHECK(cudaStreamWaitEvent(group->stream, ready.get(), 0));
    BRAID_CUDA_CHECK(cudaEventRecord(start.get(), group->stream));
    const CallContext ctx{Clock::now() + timeout, timeout, keep_waiting};
    try {
      body(*group->transport, group->stream, ctx);
    } catch (const RingAbandoned&) {
      throw;  // the group failed meanwhile: its error stands
    } catch (const std::exception& e) {
      BRAID_FAIL("group '{}' ({}, {} ranks) could not launch {} on rank {} (cuda:{}): {}",
                 group->name, group->transport->kind(), group->size, op_kind_name(kind),
                 group->rank, group->device, e.what());
    }
    BRAID_CUDA_CHECK(cudaEventRecord(done.get(), group->stream));
    (void)keep;  // the tensors live as long as the op
  };
  op->test = [group, done, spec](const EngineOp& self) {
    const cudaError_t status = query_event(done.get());
    if (status == cudaSuccess) return true;
    std::string error;
    if (status != cudaErrorNotReady) {
      (void)cudaGetLastError();
      error = "CUDA error " + cuda::describe_status(status);
    } else {
      error = group->transport->async_error();
    }
    if (error.empty()) return false;
    BRAID_FAIL(
        "{}", nccl::async_error_message(
                  failed_op(*group, spec, self.seq, spec.describe ? spec.describe() : "-"), error));
  };
  op->reached = [start] { return query_event(start.get()) == cudaSuccess; };
  std::shared_ptr<EngineWork> inner = engine.issue(std::move(op));
  return std::make_shared<NcclWorkImpl>(std::move(inner), std::move(done), group->device,
                                        spec.blocking_wait);
}

}  // namespace detail

namespace {

using detail::Clock;
using detail::DeviceGroup;
using detail::OpKind;
using detail::OpSpec;

void check_device(int device, const std::string& name) {
  const int count = cuda::device_count();
  BRAID_CHECK(count > 0,
              "NcclProcessGroup '{}': no CUDA device is available (no device, or no usable "
              "driver); CPU tensors use an MPI process group instead",
              name);
  BRAID_CHECK(device >= 0 && device < count,
              "NcclProcessGroup '{}': cuda:{} does not exist: {} CUDA device(s) are visible", name,
              device, count);
}

bool overlaps(const Tensor& a, const Tensor& b) {
  const auto* pa = static_cast<const char*>(a.data_ptr());
  const auto* pb = static_cast<const char*>(b.data_ptr());
  return a.nbytes() > 0 && b.nbytes() > 0 && pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

void copy_async(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes > 0)
    BRAID_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
}

// The control channel's key of a new group: drawn by rank 0, broadcast over the bootstrap group
// (0 when MPI is not up: the engine then watches itself).
uint64_t agree_on_key(ProcessGroup& bootstrap) {
  if (!detail::MpiRuntime::active()) return 0;
  Tensor key = Tensor::zeros({1}, DType::i64);
  if (bootstrap.rank() == 0)
    key.data<int64_t>()[0] = static_cast<int64_t>(detail::MpiRuntime::get().new_group_key());
  bootstrap.broadcast(key, 0)->wait();
  return static_cast<uint64_t>(key.data<int64_t>()[0]);
}

}  // namespace

// ---- NcclProcessGroup ---------------------------------------------------------------------------

struct NcclProcessGroup::State {
  std::shared_ptr<DeviceGroup> group;
  std::shared_ptr<detail::OpEngine> engine;
};

NcclProcessGroup::NcclProcessGroup(ProcessGroupPtr mpi_group, int device, std::string name,
                                   std::unique_ptr<detail::CommTransport> transport)
    : ProcessGroup(std::move(name), mpi_group->rank(), mpi_group->size(), mpi_group->world_ranks()),
      mpi_group_(std::move(mpi_group)),
      device_(device),
      state_(std::make_unique<State>()) {
  set_timeout(mpi_group_->timeout());
  auto group = std::make_shared<DeviceGroup>();
  group->transport = std::move(transport);
  group->device = device;
  group->name = this->name();
  group->rank = rank();
  group->size = size();
  try {
    cuda::DeviceGuard guard(device);
    // Non-blocking: no implicit ordering with any other stream; launch()'s events order the
    // group's stream after the caller's, so communication overlaps compute.
    BRAID_CUDA_CHECK(cudaStreamCreateWithFlags(&group->stream, cudaStreamNonBlocking));
    BRAID_CUDA_CHECK(cudaMalloc(&group->barrier, sizeof(int32_t)));
    BRAID_CUDA_CHECK(cudaMemset(group->barrier, 0, sizeof(int32_t)));
  } catch (...) {
    if (group->barrier != nullptr) (void)cudaFree(group->barrier);
    if (group->stream != nullptr) (void)cudaStreamDestroy(group->stream);
    group->transport->abort();
    throw;
  }
  detail::EngineConfig config;
  config.name = this->name();
  config.backend = "nccl";
  config.key = agree_on_key(*mpi_group_);
  config.rank = rank();
  config.size = size();
  config.world_ranks = world_ranks();
  config.thread_name = "braid-nccl-pg";
  // Aborting makes the transport's enqueued work return; a diagnosed timeout was logged already.
  config.on_failure = [group](const std::exception_ptr& error, bool logged) {
    if (!logged) {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        log().error("{}", e.what());
      }
      collective_log().dump_to_log(fmt::format("group '{}' (nccl) failed", group->name));
    }
    group->transport->abort();
  };
  // Dropping a device tensor may wait for the device: never on the progress thread, which must
  // stay free to time out a hung transfer.
  config.release_on_caller = true;
  state_->group = group;
  state_->engine = detail::OpEngine::start(std::move(config));
}

std::shared_ptr<NcclProcessGroup> NcclProcessGroup::create(ProcessGroupPtr mpi_group, int device,
                                                           std::string name) {
  return create_with(std::move(mpi_group), device, std::move(name),
                     &detail::make_default_transport);
}

std::shared_ptr<NcclProcessGroup> NcclProcessGroup::create_standin(ProcessGroupPtr mpi_group,
                                                                   int device, std::string name) {
  return create_with(std::move(mpi_group), device, std::move(name),
                     &detail::make_standin_transport);
}

std::shared_ptr<NcclProcessGroup> NcclProcessGroup::create_with(ProcessGroupPtr mpi_group,
                                                                int device, std::string name,
                                                                TransportFactory factory) {
  BRAID_CHECK(mpi_group != nullptr, "NcclProcessGroup::create('{}'): the bootstrap group is null",
              name);
  check_device(device, name);
  cuda::DeviceGuard guard(device);
  auto transport = factory(mpi_group, device, name);
  return std::shared_ptr<NcclProcessGroup>(
      new NcclProcessGroup(std::move(mpi_group), device, std::move(name), std::move(transport)));
}

NcclProcessGroup::~NcclProcessGroup() {
  try {
    // Lets the outstanding operations finish (each bounded by the watchdog), then releases the
    // transport, the stream and the barrier word.
    state_->engine->shutdown();
    DeviceGroup& g = *state_->group;
    if (state_->engine->failure())
      g.transport->abort();
    else
      g.transport->finalize(Clock::now() + timeout());
    // Errors are dropped (and cleared): this also runs at exit, possibly after the runtime has
    // begun unloading.
    cuda::DeviceGuard guard(device_);
    if (g.stream != nullptr) (void)cudaStreamDestroy(g.stream);
    if (g.barrier != nullptr) (void)cudaFree(g.barrier);
    g.stream = nullptr;
    g.barrier = nullptr;
    (void)cudaGetLastError();
  } catch (const std::exception& e) {
    log().error("destroying group '{}': {}", name(), e.what());
  }
}

void NcclProcessGroup::synchronize() {
  state_->engine->drain();
}

std::string NcclProcessGroup::transport() const {
  return std::string(state_->group->transport->kind());
}

WorkPtr NcclProcessGroup::all_reduce(Tensor& tensor, ReduceOp op) {
  nccl::check_tensor(name(), "all_reduce", "tensor", tensor, device_);
  OpSpec spec{OpKind::all_reduce,
              -1,
              0,
              [t = tensor, op] { return fmt::format("{} {}", t.str(), reduce_op_name(op)); },
              tensor.dtype(),
              tensor.numel(),
              timeout(),
              false};
  return detail::launch(*state_->engine, state_->group, std::move(spec), {tensor},
                        [t = tensor, op](detail::CommTransport& transport, cudaStream_t stream,
                                         const detail::CallContext& ctx) {
                          if (t.numel() == 0) return;
                          transport.all_reduce(t.data_ptr(), t.data_ptr(),
                                               static_cast<size_t>(t.numel()), t.dtype(), op,
                                               stream, ctx);
                        });
}

WorkPtr NcclProcessGroup::reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) {
  nccl::check_tensor(name(), "reduce_scatter", "input", input, device_);
  nccl::check_tensor(name(), "reduce_scatter", "output", output, device_);
  nccl::check_same_dtype(name(), "reduce_scatter", input, output);
  const int64_t total = input.numel();
  BRAID_CHECK(output.numel() == chunk_size(total, size(), rank()),
              "reduce_scatter on group '{}': rank {} must receive chunk_size({}, {}, {}) = {} "
              "elements, but output is {}",
              name(), rank(), total, size(), rank(), chunk_size(total, size(), rank()),
              output.str());
  OpSpec spec{OpKind::reduce_scatter,
              -1,
              0,
              [in = input, out = output, op] {
                return fmt::format("{} -> {} {}", in.str(), out.str(), reduce_op_name(op));
              },
              input.dtype(),
              total,
              timeout(),
              false};
  const nccl::ChunkPlan plan = nccl::plan_chunks(total, size());
  return detail::launch(
      *state_->engine, state_->group, std::move(spec), {input, output},
      [in = input, out = output, op, plan, rank = rank()](
          detail::CommTransport& transport, cudaStream_t stream, const detail::CallContext& ctx) {
        if (plan.total == 0) return;
        const size_t esize = dtype_size(in.dtype());
        if (plan.even()) {
          // The in-place layout (output = this rank's chunk of input) is fine; any other overlap
          // is undefined for NCCL, so the input is copied first.
          const void* send = in.data_ptr();
          const char* own_chunk =
              static_cast<const char*>(in.data_ptr()) + rank * plan.base * esize;
          std::optional<cuda::ScratchBuffer> copy;
          if (overlaps(in, out) && out.data_ptr() != own_chunk) {
            copy.emplace(in.nbytes(), stream);
            copy_async(copy->as<void>(), in.data_ptr(), in.nbytes(), stream);
            send = copy->as<void>();
          }
          transport.reduce_scatter(send, out.data_ptr(), static_cast<size_t>(plan.base), in.dtype(),
                                   op, stream, ctx);
          return;
        }
        // Uneven: reduce padded slots. A rank whose chunk fills its slot receives straight into
        // output; the others receive the slot and keep its first chunk_size elements. The pack
        // copy has read the input before the transport writes, so input and output may overlap.
        cuda::ScratchBuffer staged(static_cast<size_t>(plan.staged_numel()) * esize, stream);
        nccl::pack_chunks(in.data_ptr(), staged.as<void>(), plan, esize, stream);
        std::optional<cuda::ScratchBuffer> slot;
        void* recv = out.data_ptr();
        if (out.numel() != plan.padded) {
          slot.emplace(static_cast<size_t>(plan.padded) * esize, stream);
          recv = slot->as<void>();
        }
        transport.reduce_scatter(staged.as<void>(), recv, static_cast<size_t>(plan.padded),
                                 in.dtype(), op, stream, ctx);
        if (slot) copy_async(out.data_ptr(), recv, out.nbytes(), stream);
      });
}

WorkPtr NcclProcessGroup::all_gather(const Tensor& input, Tensor& output) {
  nccl::check_tensor(name(), "all_gather", "input", input, device_);
  nccl::check_tensor(name(), "all_gather", "output", output, device_);
  nccl::check_same_dtype(name(), "all_gather", input, output);
  const int64_t total = output.numel();
  BRAID_CHECK(input.numel() == chunk_size(total, size(), rank()),
              "all_gather on group '{}': rank {} must contribute chunk_size({}, {}, {}) = {} "
              "elements, but input is {}",
              name(), rank(), total, size(), rank(), chunk_size(total, size(), rank()),
              input.str());
  OpSpec spec{OpKind::all_gather,
              -1,
              0,
              [in = input, out = output] { return fmt::format("{} -> {}", in.str(), out.str()); },
              input.dtype(),
              total,
              timeout(),
              false};
  const nccl::ChunkPlan plan = nccl::plan_chunks(total, size());
  return detail::launch(
      *state_->engine, state_->group, std::move(spec), {input, output},
      [in = input, out = output, plan, rank = rank()](
          detail::CommTransport& transport, cudaStream_t stream, const detail::CallContext& ctx) {
        if (plan.total == 0) return;
        const size_t esize = dtype_size(in.dtype());
        if (plan.even()) {
          const void* send = in.data_ptr();
          const char* own_slot =
              static_cast<const char*>(out.data_ptr()) + rank * plan.base * esize;
          std::optional<cuda::ScratchBuffer> copy;
          if (send != own_slot && overlaps(in, out)) {
            copy.emplace(in.nbytes(), stream);
            copy_async(copy->as<void>(), in.data_ptr(), in.nbytes(), stream);
            send = copy->as<void>();
          }
          transport.all_gather(send, out.data_ptr(), static_cast<size_t>(plan.base), in.dtype(),
                               stream, ctx);
          return;
        }
        // Uneven: every rank sends a full slot (a short chunk is copied and padded with one
        // zero) and receives all slots, which are then unpacked into output.
        const void* send = in.data_ptr();
        std::optional<cuda::ScratchBuffer> padded;
        if (in.numel() != plan.padded) {
          padded.emplace(static_cast<size_t>(plan.padded) * esize, stream);
          BRAID_CUDA_CHECK(cudaMemsetAsync(padded->as<char>() + in.nbytes(), 0,
                                           esize * (plan.padded - in.numel()), stream));
          copy_async(padded->as<void>(), in.data_ptr(), in.nbytes(), stream);
          send = padded->as<void>();
        }
        cuda::ScratchBuffer staged(static_cast<size_t>(plan.staged_numel()) * esize, stream);
        transport.all_gather(send, staged.as<void>(), static_cast<size_t>(plan.padded), in.dtype(),
                             stream, ctx);
        nccl::unpack_chunks(staged.as<void>(), out.data_ptr(), plan, esize, stream);
      });
}

WorkPtr NcclProcessGroup::broadcast(Tensor& tensor, int root) {
  nccl::check_tensor(name(), "broadcast", "tensor", tensor, device_);
  BRAID_CHECK(root >= 0 && root < size(),
              "broadcast on group '{}': root {} is not a rank of a group of size {}", name(), root,
              size());
  OpSpec spec{OpKind::broadcast,
              -1,
              0,
              [t = tensor, root] { return fmt::format("{} from rank {}", t.str(), root); },
              tensor.dtype(),
              tensor.numel(),
              timeout(),
              false};
  return detail::launch(*state_->engine, state_->group, std::move(spec), {tensor},
                        [t = tensor, root](detail::CommTransport& transport, cudaStream_t stream,
                                           const detail::CallContext& ctx) {
                          if (t.numel() == 0) return;
                          transport.broadcast(t.data_ptr(), static_cast<size_t>(t.numel()),
                                              t.dtype(), root, stream, ctx);
                        });
}

WorkPtr NcclProcessGroup::send(const Tensor& tensor, int dst, int tag) {
  nccl::check_tensor(name(), "send", "tensor", tensor, device_);
  nccl::check_peer(name(), "send", dst, rank(), size());
  BRAID_CHECK(tag >= 0, "send on group '{}': tag {} is negative", name(), tag);
  OpSpec spec{OpKind::send,
              dst,
              tag,
              [t = tensor, tag] { return fmt::format("{} tag {}", t.str(), tag); },
              tensor.dtype(),
              tensor.numel(),
              timeout(),
              false};
  return detail::launch(*state_->engine, state_->group, std::move(spec), {tensor},
                        [t = tensor, dst](detail::CommTransport& transport, cudaStream_t stream,
                                          const detail::CallContext& ctx) {
                          if (t.numel() == 0) return;
                          transport.send(t.data_ptr(), static_cast<size_t>(t.numel()), t.dtype(),
                                         dst, stream, ctx);
                        });
}

WorkPtr NcclProcessGroup::recv(Tensor& tensor, int src, int tag) {
  nccl::check_tensor(name(), "recv", "tensor", tensor, device_);
  nccl::check_peer(name(), "recv", src, rank(), size());
  BRAID_CHECK(tag >= 0, "recv on group '{}': tag {} is negative", name(), tag);
  OpSpec spec{OpKind::recv,
              src,
              tag,
              [t = tensor, tag] { return fmt::format("{} tag {}", t.str(), tag); },
              tensor.dtype(),
              tensor.numel(),
              timeout(),
              false};
  return detail::launch(*state_->engine, state_->group, std::move(spec), {tensor},
                        [t = tensor, src](detail::CommTransport& transport, cudaStream_t stream,
                                          const detail::CallContext& ctx) {
                          if (t.numel() == 0) return;
                          transport.recv(t.data_ptr(), static_cast<size_t>(t.numel()), t.dtype(),
                                         src, stream, ctx);
                        });
}

WorkPtr NcclProcessGroup::barrier() {
  OpSpec spec{OpKind::barrier, -1, 0,         [] { return std::string("-"); },
              DType::u8,       0,  timeout(), true};
  return detail::launch(
      *state_->engine, state_->group, std::move(spec), {},
      [barrier = state_->group->barrier](detail::CommTransport& transport, cudaStream_t stream,
                                         const detail::CallContext& ctx) {
        transport.all_reduce(barrier, barrier, 1, DType::i32, ReduceOp::sum, stream, ctx);
      });
}

std::shared_ptr<ProcessGroup> NcclProcessGroup::split_by_color(int color, int key,
                                                               std::string name) {
  // The MPI side decides membership and order; the transport follows it.
  ProcessGroupPtr sub = mpi_group_->split_by_color(color, key, name);
  if (sub != nullptr) sub->set_timeout(timeout());
  // The transport's split is one of this group's collectives (a sequence number, a timeout).
  auto child = std::make_shared<std::unique_ptr<detail::CommTransport>>();
  auto op = std::make_unique<detail::EngineOp>();
  op->kind = OpKind::split;
  op->dtype = DType::i32;
  op->numel = 1;
  op->describe = [name, color, key] {
    return fmt::format("'{}' color {} key {}", name, color, key);
  };
  op->timeout = timeout();
  op->post_at_issue = true;
  op->error_fails_group = true;
  op->post = [group = state_->group, sub, color, name, child,
              timeout = timeout()](const detail::KeepWaiting&) {
    cuda::DeviceGuard guard(group->device);
    *child = group->transport->split(sub, color, group->device, name, Clock::now() + timeout);
  };
  op->test = [](const detail::EngineOp&) { return true; };
  state_->engine->issue(std::move(op))->wait();
  if (sub == nullptr) return nullptr;
  BRAID_CHECK(*child != nullptr, "split of group '{}': the transport gave rank {} no group",
              this->name(), rank());
  return std::shared_ptr<NcclProcessGroup>(
      new NcclProcessGroup(std::move(sub), device_, std::move(name), std::move(*child)));
}

DeviceGroupFactory nccl_group_factory(int device) {
  return [device](const ProcessGroupPtr& mpi_group, const std::string& axis) -> ProcessGroupPtr {
    return NcclProcessGroup::create(mpi_group, device, axis);
  };
}

}  // namespace braid::dist
