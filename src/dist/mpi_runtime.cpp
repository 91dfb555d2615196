// The control channel: a thread on a private copy of MPI_COMM_WORLD that answers peers' sequence
// queries, watches every MPI group's deadline and diagnoses the ones that ran past it.
#include "dist/mpi_runtime.h"

#include <fmt/format.h>
#include <pthread.h>

#include <array>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "braid/core/logging.h"
#include "braid/dist/collective_log.h"
#include "braid/dist/process_group.h"

namespace braid::dist::detail {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return fmt::format("MPI error {}", code);
  return fmt::format("{} (MPI error {})", std::string(text, length), code);
}

int comm_rank(MPI_Comm comm) {
  int rank = 0;
  BRAID_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  return rank;
}

int comm_size(MPI_Comm comm) {
  int size = 0;
  BRAID_MPI_CHECK(MPI_Comm_size(comm, &size));
  return size;
}

std::string_view op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::none:
      return "nothing";
    case OpKind::all_reduce:
      return "all_reduce";
    case OpKind::reduce_scatter:
      return "reduce_scatter";
    case OpKind::all_gather:
      return "all_gather";
    case OpKind::broadcast:
      return "broadcast";
    case OpKind::barrier:
      return "barrier";
    case OpKind::split:
      return "split";
    case OpKind::send:
      return "send";
    case OpKind::recv:
      return "recv";
  }
  return "?";
}

namespace {

// Wire format of the control channel (plain bytes: every rank runs the same binary).
struct Query {
  uint64_t group_key;
  uint64_t query_id;
};
struct Reply {
  uint64_t query_id;
  int32_t known;  // 0: this rank has no live group with that key
  int32_t started_op;
  int64_t issued;
  int64_t started;
  int64_t completed;
};

constexpr int kQueryTag = 1;
// Replies go to tag kReplyTagBase + query_id % kReplyTagSpan so that concurrent diagnoses asking
// the same peer never take each other's answers; MPI guarantees tags up to 32767.
constexpr int kReplyTagBase = 100;
constexpr uint64_t kReplyTagSpan = 30000;
int reply_tag(uint64_t query_id) {
  return kReplyTagBase + static_cast<int>(query_id % kReplyTagSpan);
}

// How long a diagnosis waits for peers before calling them "not responding". A healthy control
// thread answers within a few polling intervals, even with its rank stuck in MPI.
constexpr auto kReplyDeadline = std::chrono::seconds(2);
constexpr auto kIdlePoll = std::chrono::milliseconds(2);
constexpr auto kWatchInterval = std::chrono::milliseconds(20);

// A message in flight; the buffer lives as long as the request, which may outlive the diagnosis
// that sent it (a dead peer never takes it).
struct PendingSend {
  std::array<char, sizeof(Reply)> buffer{};
  MPI_Request request = MPI_REQUEST_NULL;
};

struct Diagnosis {
  struct Peer {
    int group_rank = 0;
    int world_rank = 0;
    uint64_t query_id = 0;
    std::unique_ptr<PendingSend> query;
    MPI_Request recv = MPI_REQUEST_NULL;
    Reply reply{};
    bool answered = false;
  };
  StuckOp op;
  std::shared_ptr<MonitoredGroup> group;
  std::chrono::steady_clock::time_point deadline;
  std::vector<Peer> peers;
};

std::string rank_str(const StuckOp& op, int group_rank) {
  const int world = op.world_ranks[group_rank];
  return world == group_rank ? fmt::format("rank {}", group_rank)
                             : fmt::format("rank {} (world {})", group_rank, world);
}

std::string join_or_none(const std::vector<std::string>& items) {
  return items.empty() ? std::string("none") : fmt::format("{}", fmt::join(items, ", "));
}

std::string describe_p2p(const StuckOp& op) {
  const bool is_recv = op.kind == OpKind::recv;
  return fmt::format(
      "{} {} {} tag {} on group '{}' ({}) did not complete within {:.1f}s on {}: {} never posted "
      "the matching {}",
      op_kind_name(op.kind), is_recv ? "from" : "to", rank_str(op, op.peer), op.tag, op.group_name,
      op.detail, op.elapsed_s, rank_str(op, op.group_rank), rank_str(op, op.peer),
      is_recv ? "send" : "recv");
}

std::string describe_collective(const Diagnosis& d) {
  const StuckOp& op = d.op;
  std::vector<std::string> never, other_op, silent;
  for (const Diagnosis::Peer& p : d.peers) {
    const std::string who = rank_str(op, p.group_rank);
    if (!p.answered) {
      silent.push_back(who);
    } else if (!p.reply.known) {
      never.push_back(who + " [group not created or already destroyed]");
    } else if (p.reply.started < op.seq) {
      never.push_back(fmt::format("{} [last issued seq {}, started seq {}]", who, p.reply.issued,
                                  p.reply.started));
    } else if (p.reply.started == op.seq && p.reply.started_op != static_cast<int32_t>(op.kind)) {
      other_op.push_back(fmt::format("{} [in {} seq {}]", who,
                                     op_kind_name(static_cast<OpKind>(p.reply.started_op)),
                                     p.reply.started));
    }
  }
  std::string message = fmt::format(
      "collective timed out: group '{}' ({}, {} ranks) {} seq {} ({}) did not complete within "
      "{:.1f}s on {}; never joined: {}; not responding: {}",
      op.group_name, op.backend, op.world_ranks.size(), op_kind_name(op.kind), op.seq, op.detail,
      op.elapsed_s, rank_str(op, op.group_rank), join_or_none(never), join_or_none(silent));
  if (!other_op.empty())
    message += fmt::format("; joined with a different collective: {}", join_or_none(other_op));
  if (never.empty() && silent.empty() && other_op.empty())
    message +=
        "; every rank entered it (shapes or dtypes differ across ranks, or the transport stalled)";
  return message;
}

}  // namespace

std::string describe_unasked(const StuckOp& op) {
  if (!is_collective(op.kind)) return describe_p2p(op);
  return fmt::format(
      "collective timed out: group '{}' ({}, {} ranks) {} seq {} ({}) did not complete within "
      "{:.1f}s on {}; no peer could be asked where it is (no MPI control channel)",
      op.group_name, op.backend, op.world_ranks.size(), op_kind_name(op.kind), op.seq, op.detail,
      op.elapsed_s, rank_str(op, op.group_rank));
}

struct MpiRuntime::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  std::thread thread;
  std::atomic<bool> stop{false};

  std::mutex mutex;  // guards groups
  std::unordered_map<uint64_t, std::weak_ptr<MonitoredGroup>> groups;

  // Control thread only.
  std::vector<std::unique_ptr<PendingSend>> sends;
  std::vector<std::unique_ptr<Diagnosis>> diagnoses;
  uint64_t next_query = 1;
  std::chrono::steady_clock::time_point next_watch{};

  std::shared_ptr<MonitoredGroup> find(uint64_t key) {
    std::lock_guard lock(mutex);
    auto it = groups.find(key);
    return it == groups.end() ? nullptr : it->second.lock();
  }

  std::unique_ptr<PendingSend> send_async(const void* data, size_t bytes, int dst, int tag) {
    auto send = std::make_unique<PendingSend>();
    std::memcpy(send->buffer.data(), data, bytes);
    BRAID_MPI_CHECK(MPI_Isend(send->buffer.data(), static_cast<int>(bytes), MPI_BYTE, dst, tag,
                              comm, &send->request));
    return send;
  }

  bool serve_queries() {
    bool any = false;
    for (int i = 0; i < 64; ++i) {
      int flag = 0;
      MPI_Status status;
      BRAID_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, kQueryTag, comm, &flag, &status));
      if (!flag) break;
      any = true;
      Query query{};
      BRAID_MPI_CHECK(MPI_Recv(&query, sizeof(Query), MPI_BYTE, status.MPI_SOURCE, kQueryTag, comm,
                               MPI_STATUS_IGNORE));
      Reply reply{};
      reply.query_id = query.query_id;
      if (auto group = find(query.group_key)) {
        const SeqState state = group->seq_state();
        reply.known = 1;
        reply.started_op = static_cast<int32_t>(state.started_op);
        reply.issued = state.issued;
        reply.started = state.started;
        reply.completed = state.completed;
      }
      log().debug("control: world rank {} asks about group {:#x}: known {}, issued {}, started {}",
                  status.MPI_SOURCE, query.group_key, reply.known, reply.issued, reply.started);
      sends.push_back(
          send_async(&reply, sizeof(Reply), status.MPI_SOURCE, reply_tag(query.query_id)));
    }
    return any;
  }

  bool progress_sends() {
    bool any = false;
    for (size_t i = 0; i < sends.size();) {
      int done = 0;
      BRAID_MPI_CHECK(MPI_Test(&sends[i]->request, &done, MPI_STATUS_IGNORE));
      if (done) {
        sends[i] = std::move(sends.back());
        sends.pop_back();
        any = true;
      } else {
        ++i;
      }
    }
    return any;
  }

  void post_reply_recv(Diagnosis::Peer& peer) {
    BRAID_MPI_CHECK(MPI_Irecv(&peer.reply, sizeof(Reply), MPI_BYTE, peer.world_rank,
                              reply_tag(peer.query_id), comm, &peer.recv));
  }

  void start_diagnosis(std::shared_ptr<MonitoredGroup> group, StuckOp op) {
    if (!is_collective(op.kind)) {
      group->fail_expired(op, describe_p2p(op));
      return;
    }
    auto d = std::make_unique<Diagnosis>();
    d->group = std::move(group);
    d->deadline = std::chrono::steady_clock::now() + kReplyDeadline;
    // MPI writes replies into the Peer entries: they must never move once a receive is posted.
    d->peers.reserve(op.world_ranks.size());
    for (int r = 0; r < static_cast<int>(op.world_ranks.size()); ++r) {
      if (r == op.group_rank) continue;
      Diagnosis::Peer& peer = d->peers.emplace_back();
      peer.group_rank = r;
      peer.world_rank = op.world_ranks[r];
      peer.query_id = next_query++;
      post_reply_recv(peer);
      const Query query{op.group_key, peer.query_id};
      peer.query = send_async(&query, sizeof(Query), peer.world_rank, kQueryTag);
    }
    d->op = std::move(op);
    log().warn("group '{}' {} seq {} is past its {:.1f}s timeout; asking {} peer(s) where they are",
               d->op.group_name, op_kind_name(d->op.kind), d->op.seq,
               d->op.timeout.count() / 1000.0, d->peers.size());
    diagnoses.push_back(std::move(d));
  }

  // Returns true once every peer answered or the deadline passed.
  bool progress_diagnosis(Diagnosis& d) {
    bool all = true;
    for (Diagnosis::Peer& peer : d.peers) {
      if (peer.query && peer.query->request != MPI_REQUEST_NULL) {
        int sent = 0;
        BRAID_MPI_CHECK(MPI_Test(&peer.query->request, &sent, MPI_STATUS_IGNORE));
      }
      if (peer.answered) continue;
      int done = 0;
      BRAID_MPI_CHECK(MPI_Test(&peer.recv, &done, MPI_STATUS_IGNORE));
      if (done && peer.reply.query_id == peer.query_id) {
        peer.answered = true;
      } else {
        // A late answer to an earlier diagnosis that used the same tag: drop it, listen again.
        if (done) post_reply_recv(peer);
        all = false;
      }
    }
    return all || std::chrono::steady_clock::now() >= d.deadline;
  }

  void conclude(Diagnosis& d) {
    for (Diagnosis::Peer& peer : d.peers) {
      if (!peer.answered && peer.recv != MPI_REQUEST_NULL) {
        MPI_Cancel(&peer.recv);
        MPI_Wait(&peer.recv, MPI_STATUS_IGNORE);
      }
      if (peer.query && peer.query->request != MPI_REQUEST_NULL)
        sends.push_back(std::move(peer.query));
    }
    d.group->fail_expired(d.op, describe_collective(d));
  }

  bool progress_diagnoses() {
    bool any = !diagnoses.empty();
    for (size_t i = 0; i < diagnoses.size();) {
      if (progress_diagnosis(*diagnoses[i])) {
        auto d = std::move(diagnoses[i]);
        diagnoses.erase(diagnoses.begin() + static_cast<std::ptrdiff_t>(i));
        conclude(*d);
      } else {
        ++i;
      }
    }
    return any;
  }

  std::vector<std::shared_ptr<MonitoredGroup>> live_groups() {
    std::vector<std::shared_ptr<MonitoredGroup>> live;
    std::lock_guard lock(mutex);
    for (auto& [key, weak] : groups)
      if (auto g = weak.lock()) live.push_back(std::move(g));
    return live;
  }

  // Every loop (a few ms apart at most): start operations queued without waking their group's
  // progress thread that nobody has claimed since (MpiProcessGroup::issue()).
  void nudge_groups() {
    const auto now = std::chrono::steady_clock::now();
    for (auto& group : live_groups()) group->nudge(now);
  }

  void watch_deadlines() {
    const auto now = std::chrono::steady_clock::now();
    if (now < next_watch) return;
    next_watch = now + kWatchInterval;
    for (auto& group : live_groups())
      if (auto stuck = group->take_expired(now)) start_diagnosis(group, std::move(*stuck));
  }

  void loop() {
    pthread_setname_np(pthread_self(), "braid-control");
    while (!stop.load(std::memory_order_acquire)) {
      bool busy = false;
      try {
        busy |= serve_queries();
        busy |= progress_sends();
        busy |= progress_diagnoses();
        nudge_groups();
        watch_deadlines();
      } catch (const std::exception& e) {
        // The control channel is diagnostics only: a failure here must not take training down.
        log().error("braid control thread: {}", e.what());
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (!busy) std::this_thread::sleep_for(kIdlePoll);
    }
    // Shutting down: nobody will read late answers; a send a dead peer never took is released to
    // MPI (its buffer is leaked on purpose, MPI may still read it).
    for (auto& d : diagnoses)
      for (Diagnosis::Peer& peer : d->peers) {
        if (!peer.answered && peer.recv != MPI_REQUEST_NULL) {
          MPI_Cancel(&peer.recv);
          MPI_Wait(&peer.recv, MPI_STATUS_IGNORE);
        }
        if (peer.query && peer.query->request != MPI_REQUEST_NULL)
          sends.push_back(std::move(peer.query));
      }
    diagnoses.clear();
    for (auto& send : sends) {
      int done = 0;
      MPI_Test(&send->request, &done, MPI_STATUS_IGNORE);
      if (!done) {
        MPI_Request_free(&send->request);
        send.release();
      }
    }
    sends.clear();
  }
};

namespace {
std::atomic<bool> g_active{false};
}

MpiRuntime& MpiRuntime::get() {
  static MpiRuntime* runtime = new MpiRuntime();
  return *runtime;
}

bool MpiRuntime::active() {
  return g_active.load(std::memory_order_acquire);
}

void MpiRuntime::start() {
  MpiRuntime& rt = get();
  BRAID_CHECK(rt.impl_ == nullptr, "braid::dist control channel started twice");
  BRAID_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rt.world_rank_));
  BRAID_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &rt.world_size_));
  auto impl = std::make_unique<Impl>();
  BRAID_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &impl->comm));
  BRAID_MPI_CHECK(MPI_Comm_set_errhandler(impl->comm, MPI_ERRORS_RETURN));
  BRAID_MPI_CHECK(MPI_Comm_set_name(impl->comm, "braid-control"));
  rt.impl_ = impl.release();
  g_active.store(true, std::memory_order_release);
  rt.impl_->thread = std::thread([impl = rt.impl_] { impl->loop(); });
}

uint64_t MpiRuntime::new_group_key() {
  return (static_cast<uint64_t>(world_rank_) << 32) | (group_counter_.fetch_add(1) + 1);
}

void MpiRuntime::add_group(const std::shared_ptr<MonitoredGroup>& group) {
  BRAID_CHECK(impl_ != nullptr, "braid::dist::init() has not been called");
  std::lock_guard lock(impl_->mutex);
  impl_->groups[group->key()] = group;
}

void MpiRuntime::remove_group(uint64_t key) {
  if (impl_ == nullptr) return;
  std::lock_guard lock(impl_->mutex);
  impl_->groups.erase(key);
}

std::vector<std::shared_ptr<MonitoredGroup>> MpiRuntime::groups() {
  std::vector<std::shared_ptr<MonitoredGroup>> out;
  if (impl_ == nullptr) return out;
  std::lock_guard lock(impl_->mutex);
  for (auto& [key, weak] : impl_->groups)
    if (auto g = weak.lock()) out.push_back(std::move(g));
  return out;
}

void MpiRuntime::stop_control() {
  if (impl_ == nullptr) return;
  impl_->stop.store(true, std::memory_order_release);
  if (impl_->thread.joinable()) impl_->thread.join();
  MPI_Comm_free(&impl_->comm);
  // The impl itself stays allocated: a late group destructor may still call remove_group.
  std::lock_guard lock(impl_->mutex);
  impl_->groups.clear();
}

void MpiRuntime::mark_finalized() {
  g_active.store(false, std::memory_order_release);
}

}  // namespace braid::dist::detail
