// MpiProcessGroup: the MPI transport of the shared operation engine (op_engine.h): validation at
// issue time, braid's rings and MPI's blocking calls as runs, send/recv as posted requests.
#include "braid/dist/mpi_process_group.h"

#include <fmt/format.h>

#include <climits>
#include <cstring>
#include <functional>

#include "braid/core/logging.h"
#include "braid/dist/collective_log.h"
#include "dist/mpi_ring.h"
#include "dist/mpi_runtime.h"
#include "dist/op_engine.h"

namespace braid::dist {

namespace {

using detail::comm_rank;
using detail::comm_size;
using detail::EngineOp;
using detail::KeepWaiting;
using detail::MpiRuntime;
using detail::OpKind;

MPI_Comm dup_for_braid(MPI_Comm comm) {
  BRAID_CHECK(MpiRuntime::active(),
              "braid::dist::init() must run before an MPI process group is created");
  BRAID_CHECK(comm != MPI_COMM_NULL, "MpiProcessGroup needs a communicator, got MPI_COMM_NULL");
  MPI_Comm dup = MPI_COMM_NULL;
  BRAID_MPI_CHECK(MPI_Comm_dup(comm, &dup));
  return dup;
}

std::vector<int> world_ranks_of(MPI_Comm comm) {
  MPI_Group group, world;
  BRAID_MPI_CHECK(MPI_Comm_group(comm, &group));
  BRAID_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  const int size = comm_size(comm);
  std::vector<int> ranks(size), out(size);
  for (int i = 0; i < size; ++i) ranks[i] = i;
  BRAID_MPI_CHECK(MPI_Group_translate_ranks(group, size, ranks.data(), world, out.data()));
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  for (int r : out)
    BRAID_CHECK(r != MPI_UNDEFINED,
                "MpiProcessGroup: the communicator has members outside MPI_COMM_WORLD (e.g. "
                "spawned processes), which braid does not support");
  return out;
}

MPI_Datatype mpi_datatype(DType t) {
  switch (t) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::i32:
      return MPI_INT32_T;
    case DType::i64:
      return MPI_INT64_T;
    case DType::u8:
      return MPI_UINT8_T;
    // Moved as raw words; reductions widen them to f32 first (widen/narrow below).
    case DType::bf16:
    case DType::f16:
      return MPI_UINT16_T;
  }
  BRAID_FAIL("dtype {} has no MPI type", static_cast<int>(t));
}

bool is_half(DType t) {
  return t == DType::bf16 || t == DType::f16;
}

void widen(const void* data, DType t, int64_t n, float* out) {
  const auto* src = static_cast<const uint16_t*>(data);
  if (t == DType::bf16) {
    for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(src[i]);
  }
}

void narrow(const float* values, int64_t n, DType t, void* data) {
  auto* dst = static_cast<uint16_t*>(data);
  if (t == DType::bf16) {
    for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(values[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_f16(values[i]);
  }
}

// f32 room for a bf16/f16 tensor's values while a ring reduces them (undefined otherwise). It is
// allocated at issue and held by the operation, so a ring that gives up leaves it alive with the
// rest of the leaked operation (MPI may still write into it).
Tensor f32_scratch(const Tensor& t, int64_t numel) {
  return is_half(t.dtype()) ? Tensor::empty({numel}, DType::f32) : Tensor();
}

template <class T>
void divide_as(void* data, int64_t n, int size) {
  auto* p = static_cast<T*>(data);
  const T divisor = static_cast<T>(size);
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / divisor);
}

void divide(void* data, DType t, int64_t n, int size) {
  switch (t) {
    case DType::f32:
      return divide_as<float>(data, n, size);
    case DType::i32:
      return divide_as<int32_t>(data, n, size);
    case DType::i64:
      return divide_as<int64_t>(data, n, size);
    case DType::u8:
      return divide_as<uint8_t>(data, n, size);
    case DType::bf16:
    case DType::f16:
      break;
  }
  BRAID_FAIL("avg of {} must be computed in f32", dtype_name(t));
}

bool overlaps(const Tensor& a, const Tensor& b) {
  const auto* pa = static_cast<const char*>(a.data_ptr());
  const auto* pb = static_cast<const char*>(b.data_ptr());
  return a.nbytes() > 0 && b.nbytes() > 0 && pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

const void* chunk_address(const Tensor& t, int parts, int index) {
  return static_cast<const char*>(t.data_ptr()) +
         chunk_offset(t.numel(), parts, index) * dtype_size(t.dtype());
}

// What a ring reads `src` from: src itself, or a copy of it when it overlaps `dst` other than
// in the one in-place layout the ring supports (mpi_ring.h).
const void* ring_source(const Tensor& src, const Tensor& dst, bool in_place,
                        std::vector<char>& copy) {
  if (in_place || !overlaps(src, dst)) return src.data_ptr();
  const auto* bytes = static_cast<const char*>(src.data_ptr());
  copy.assign(bytes, bytes + src.nbytes());
  return copy.data();
}

std::unique_ptr<EngineOp> new_op(OpKind kind, DType dtype, int64_t numel,
                                 std::function<std::string()> describe,
                                 std::chrono::milliseconds timeout) {
  auto op = std::make_unique<EngineOp>();
  op->kind = kind;
  op->dtype = dtype;
  op->numel = numel;
  op->describe = std::move(describe);
  op->timeout = timeout;
  return op;
}

}  // namespace

// ---- MpiProcessGroup ----------------------------------------------------------------------------

MpiProcessGroup::MpiProcessGroup(MPI_Comm comm, std::string name)
    : MpiProcessGroup(Adopt{}, dup_for_braid(comm), std::move(name), default_collective_timeout()) {
}

MpiProcessGroup::MpiProcessGroup(Adopt, MPI_Comm owned, std::string name,
                                 std::chrono::milliseconds timeout)
    : ProcessGroup(std::move(name), comm_rank(owned), comm_size(owned), world_ranks_of(owned)) {
  set_timeout(timeout);
  BRAID_MPI_CHECK(MPI_Comm_set_errhandler(owned, MPI_ERRORS_RETURN));
  const std::string comm_name = "braid:" + this->name();
  MPI_Comm_set_name(owned, comm_name.c_str());
  // Every member must register the group under the same key for the control channel.
  uint64_t key = rank() == 0 ? MpiRuntime::get().new_group_key() : 0;
  BRAID_MPI_CHECK(MPI_Bcast(&key, 1, MPI_UINT64_T, 0, owned));
  // braid's ring collectives get a communicator of their own, so their point-to-point messages
  // never match the group's send/recv.
  MPI_Comm ring = MPI_COMM_NULL;
  BRAID_MPI_CHECK(MPI_Comm_dup(owned, &ring));
  BRAID_MPI_CHECK(MPI_Comm_set_errhandler(ring, MPI_ERRORS_RETURN));
  comm_ = owned;
  ring_comm_ = ring;
  detail::EngineConfig config;
  config.name = this->name();
  config.backend = "mpi";
  config.key = key;
  config.rank = rank();
  config.size = size();
  config.world_ranks = world_ranks();
  config.thread_name = "braid-mpi-pg";
  // Runs once no thread can be inside MPI on them (possibly on a progress thread left behind).
  config.release = [owned, ring]() mutable {
    if (!MpiRuntime::active()) return;
    MPI_Comm_free(&owned);
    MPI_Comm_free(&ring);
  };
  engine_ = detail::OpEngine::start(std::move(config));
}

MpiProcessGroup::~MpiProcessGroup() {
  try {
    engine_->shutdown();
  } catch (const std::exception& e) {
    log().error("destroying group '{}': {}", name(), e.what());
  }
}

MPI_Comm MpiProcessGroup::comm() const {
  return comm_;
}

namespace {

void check_tensor(const ProcessGroup& group, const Tensor& t, std::string_view op,
                  std::string_view what) {
  BRAID_CHECK(t.defined(), "{} on group '{}': {} is an undefined tensor", op, group.name(), what);
  BRAID_CHECK(t.device().is_cpu(),
              "{} on group '{}': {} {} is on {}, but the MPI backend handles CPU tensors only; "
              "CUDA tensors go through the NCCL backend (an NCCL process group)",
              op, group.name(), what, t.str(), t.device().str());
  BRAID_CHECK(t.is_contiguous(),
              "{} on group '{}': {} {} is not contiguous; the MPI backend needs a dense tensor "
              "(pass t.contiguous() and copy the result back)",
              op, group.name(), what, t.str());
  BRAID_CHECK(
      t.numel() <= INT_MAX,
      "{} on group '{}': {} {} has more than 2^31-1 elements, beyond one MPI call; split it", op,
      group.name(), what, t.str());
}

}  // namespace

WorkPtr MpiProcessGroup::all_reduce(Tensor& tensor, ReduceOp op) {
  check_tensor(*this, tensor, "all_reduce", "tensor");
  auto pending = new_op(
      OpKind::all_reduce, tensor.dtype(), tensor.numel(),
      [t = tensor, op] { return fmt::format("{} {}", t.str(), reduce_op_name(op)); }, timeout());
  pending->polled = true;
  pending->run = [t = tensor, wide = f32_scratch(tensor, tensor.numel()), op, size = size(),
                  rank = rank(), ring = ring_comm_](const KeepWaiting& keep_waiting) {
    // A reduce_scatter into this rank's own chunk, then an all_gather of the chunks, in place.
    const bool half = is_half(t.dtype());
    if (half) widen(t.data_ptr(), t.dtype(), t.numel(), wide.data<float>());
    const Tensor& data = half ? wide : t;
    void* own = const_cast<void*>(chunk_address(data, size, rank));
    detail::ring_reduce_scatter(data.data_ptr(), own, data.numel(), data.dtype(), op, ring,
                                keep_waiting);
    if (op == ReduceOp::avg) divide(own, data.dtype(), chunk_size(data.numel(), size, rank), size);
    detail::ring_all_gather(own, data.data_ptr(), data.numel(), data.dtype(), ring, keep_waiting);
    if (half) narrow(wide.data<float>(), t.numel(), t.dtype(), t.data_ptr());
  };
  return engine_->issue(std::move(pending));
}

WorkPtr MpiProcessGroup::reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) {
  check_tensor(*this, input, "reduce_scatter", "input");
  check_tensor(*this, output, "reduce_scatter", "output");
  BRAID_CHECK(input.dtype() == output.dtype(),
              "reduce_scatter on group '{}': input {} and output {} differ in dtype", name(),
              input.str(), output.str());
  const int64_t total = input.numel();
  BRAID_CHECK(output.numel() == chunk_size(total, size(), rank()),
              "reduce_scatter on group '{}': rank {} must receive chunk_size({}, {}, {}) = {} "
              "elements, but output is {}",
              name(), rank(), total, size(), rank(), chunk_size(total, size(), rank()),
              output.str());
  auto pending = new_op(
      OpKind::reduce_scatter, input.dtype(), total,
      [in = input, out = output, op] {
        return fmt::format("{} -> {} {}", in.str(), out.str(), reduce_op_name(op));
      },
      timeout());
  pending->polled = true;
  pending->run = [in = input, out = output, wide_in = f32_scratch(input, input.numel()),
                  wide_out = f32_scratch(output, output.numel()), op, size = size(), rank = rank(),
                  ring = ring_comm_](const KeepWaiting& keep_waiting) {
    if (is_half(in.dtype())) {
      widen(in.data_ptr(), in.dtype(), in.numel(), wide_in.data<float>());
      detail::ring_reduce_scatter(wide_in.data_ptr(), wide_out.data_ptr(), in.numel(), DType::f32,
                                  op, ring, keep_waiting);
      if (op == ReduceOp::avg) divide(wide_out.data_ptr(), DType::f32, out.numel(), size);
      narrow(wide_out.data<float>(), out.numel(), out.dtype(), out.data_ptr());
      return;
    }
    std::vector<char> copy;
    const bool in_place = out.data_ptr() == chunk_address(in, size, rank);
    detail::ring_reduce_scatter(ring_source(in, out, in_place, copy), out.data_ptr(), in.numel(),
                                in.dtype(), op, ring, keep_waiting);
    if (op == ReduceOp::avg) divide(out.data_ptr(), out.dtype(), out.numel(), size);
  };
  return engine_->issue(std::move(pending));
}

WorkPtr MpiProcessGroup::all_gather(const Tensor& input, Tensor& output) {
  check_tensor(*this, input, "all_gather", "input");
  check_tensor(*this, output, "all_gather", "output");
  BRAID_CHECK(input.dtype() == output.dtype(),
              "all_gather on group '{}': input {} and output {} differ in dtype", name(),
              input.str(), output.str());
  const int64_t total = output.numel();
  BRAID_CHECK(input.numel() == chunk_size(total, size(), rank()),
              "all_gather on group '{}': rank {} must contribute chunk_size({}, {}, {}) = {} "
              "elements, but input is {}",
              name(), rank(), total, size(), rank(), chunk_size(total, size(), rank()),
              input.str());
  auto pending = new_op(
      OpKind::all_gather, input.dtype(), total,
      [in = input, out = output] { return fmt::format("{} -> {}", in.str(), out.str()); },
      timeout());
  pending->polled = true;
  pending->run = [in = input, out = output, size = size(), rank = rank(),
                  ring = ring_comm_](const KeepWaiting& keep_waiting) {
    std::vector<char> copy;
    const bool in_place = in.data_ptr() == chunk_address(out, size, rank);
    detail::ring_all_gather(ring_source(in, out, in_place, copy), out.data_ptr(), out.numel(),
                            in.dtype(), ring, keep_waiting);
  };
  return engine_->issue(std::move(pending));
}

WorkPtr MpiProcessGroup::broadcast(Tensor& tensor, int root) {
  check_tensor(*this, tensor, "broadcast", "tensor");
  BRAID_CHECK(root >= 0 && root < size(),
              "broadcast on group '{}': root {} is not a rank of a group of size {}", name(), root,
              size());
  auto pending = new_op(
      OpKind::broadcast, tensor.dtype(), tensor.numel(),
      [t = tensor, root] { return fmt::format("{} from rank {}", t.str(), root); }, timeout());
  pending->run = [t = tensor, root, comm = comm_](const KeepWaiting&) {
    BRAID_MPI_CHECK(
        MPI_Bcast(t.data_ptr(), static_cast<int>(t.numel()), mpi_datatype(t.dtype()), root, comm));
  };
  return engine_->issue(std::move(pending));
}

namespace {

void check_peer(const ProcessGroup& group, std::string_view op, int peer, int tag) {
  BRAID_CHECK(peer >= 0 && peer < group.size(),
              "{} on group '{}': peer {} is not a rank of a group of size {}", op, group.name(),
              peer, group.size());
  // MPI attaches the tag bound to MPI_COMM_WORLD; it holds for every communicator.
  int* tag_ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found);
  const int max_tag = found && tag_ub ? *tag_ub : 32767;
  BRAID_CHECK(tag >= 0 && tag <= max_tag, "{} on group '{}': tag {} is outside [0, {}]", op,
              group.name(), tag, max_tag);
}

// A posted request: the MPI_Request lives with the op (its lambdas share it).
struct Request {
  MPI_Request request = MPI_REQUEST_NULL;
};

// MPI_Test of a posted request; `check` validates what a recv got.
bool test_request(Request& r, const std::function<void(const MPI_Status&)>& check) {
  int done = 0;
  MPI_Status status;
  BRAID_MPI_CHECK(MPI_Test(&r.request, &done, &status));
  if (done && check) check(status);
  return done != 0;
}

}  // namespace

WorkPtr MpiProcessGroup::send(const Tensor& tensor, int dst, int tag) {
  check_tensor(*this, tensor, "send", "tensor");
  check_peer(*this, "send", dst, tag);
  auto pending = new_op(
      OpKind::send, tensor.dtype(), tensor.numel(), [t = tensor] { return t.str(); }, timeout());
  pending->peer = dst;
  pending->tag = tag;
  auto request = std::make_shared<Request>();
  pending->post = [t = tensor, dst, tag, comm = comm_, request](const KeepWaiting&) {
    BRAID_MPI_CHECK(MPI_Isend(t.data_ptr(), static_cast<int>(t.numel()), mpi_datatype(t.dtype()),
                              dst, tag, comm, &request->request));
  };
  pending->test = [request](const EngineOp&) { return test_request(*request, nullptr); };
  pending->abandon = [request] { MPI_Request_free(&request->request); };
  return engine_->issue(std::move(pending));
}

WorkPtr MpiProcessGroup::recv(Tensor& tensor, int src, int tag) {
  check_tensor(*this, tensor, "recv", "tensor");
  check_peer(*this, "recv", src, tag);
  auto pending = new_op(
      OpKind::recv, tensor.dtype(), tensor.numel(), [t = tensor] { return t.str(); }, timeout());
  pending->peer = src;
  pending->tag = tag;
  auto request = std::make_shared<Request>();
  pending->post = [t = tensor, src, tag, comm = comm_, request](const KeepWaiting&) {
    BRAID_MPI_CHECK(MPI_Irecv(t.data_ptr(), static_cast<int>(t.numel()), mpi_datatype(t.dtype()),
                              src, tag, comm, &request->request));
  };
  pending->test = [request, t = tensor, src, tag, group = name()](const EngineOp&) {
    return test_request(*request, [&](const MPI_Status& status) {
      int count = 0;
      MPI_Status copy = status;
      BRAID_MPI_CHECK(MPI_Get_count(&copy, mpi_datatype(t.dtype()), &count));
      BRAID_CHECK(count == t.numel(),
                  "recv on group '{}' from rank {} tag {}: got {} elements, expected {} ({})",
                  group, src, tag, count, t.numel(), t.str());
    });
  };
  pending->abandon = [request] {
    MPI_Cancel(&request->request);
    MPI_Request_free(&request->request);
  };
  return engine_->issue(std::move(pending));
}

WorkPtr MpiProcessGroup::barrier() {
  auto pending = new_op(
      OpKind::barrier, DType::u8, 0, [] { return std::string("-"); }, timeout());
  pending->run = [comm = comm_](const KeepWaiting&) { BRAID_MPI_CHECK(MPI_Barrier(comm)); };
  return engine_->issue(std::move(pending));
}

std::shared_ptr<ProcessGroup> MpiProcessGroup::split_by_color(int color, int key,
                                                              std::string name) {
  auto result = std::make_shared<MPI_Comm>(MPI_COMM_NULL);
  auto pending = new_op(
      OpKind::split, DType::i32, 1,
      [name, color, key] { return fmt::format("'{}' color {} key {}", name, color, key); },
      timeout());
  // MPI_UNDEFINED makes MPI_Comm_split return MPI_COMM_NULL for ranks joining no group.
  pending->run = [result, color = color < 0 ? MPI_UNDEFINED : color, key,
                  comm = comm_](const KeepWaiting&) {
    BRAID_MPI_CHECK(MPI_Comm_split(comm, color, key, result.get()));
  };
  engine_->issue(std::move(pending))->wait();
  if (*result == MPI_COMM_NULL) return nullptr;
  return std::shared_ptr<MpiProcessGroup>(
      new MpiProcessGroup(Adopt{}, *result, std::move(name), timeout()));
}

}  // namespace braid::dist
