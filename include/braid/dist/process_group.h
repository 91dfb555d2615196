// ProcessGroup and Work: collectives over a set of ranks, each on ONE tensor, asynchronous.
//
// ORDERING CONTRACT: every rank of a group issues the same collectives, on tensors of the
// same shapes and dtypes, in the same order. Sequence numbers count them per group; a rank
// that skips one is reported by name when the others time out. Point-to-point send/recv are
// matched by (peer, tag) in issue order and do not take part in the collective sequence.
//
// Collectives complete in issue order within a group; a send or recv completes on its own, as
// soon as it is done, whatever was issued before it (so a pipeline can wait for the
// activation it needs while receives posted for later stay open). A tensor passed to a collective
// must not be read or written by the caller until its Work has completed (wait() or is_completed()
// returned true); the group keeps the tensor alive until then.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "braid/core/tensor.h"

namespace braid::dist {

enum class ReduceOp { sum, avg, max, min };
std::string_view reduce_op_name(ReduceOp op);

class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the operation finished. Throws its stored error (a failed or timed-out
  // collective: the message names group, op, sequence number and the missing ranks).
  virtual void wait() = 0;
  virtual bool is_completed() = 0;
  // The stored error, or null.
  virtual std::exception_ptr error() const = 0;
};
using WorkPtr = std::shared_ptr<Work>;

// How a buffer of `total` elements is split over `parts` ranks by reduce_scatter and
// all_gather: even chunks, the first total % parts ranks holding one extra element.
int64_t chunk_size(int64_t total, int parts, int index);
int64_t chunk_offset(int64_t total, int parts, int index);

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return name_; }
  // World ranks of the members, in group-rank order.
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

  // In place on every rank. avg divides by size() after summing.
  virtual WorkPtr all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::sum);
  // input: the full buffer (same numel on every rank); output: this rank's chunk of the
  // reduction, chunk_size(input.numel(), size(), rank()) elements.
  virtual WorkPtr reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op = ReduceOp::sum);
  // input: this rank's chunk, chunk_size(output.numel(), size(), rank()) elements; output:
  // every rank's chunk concatenated in rank order.
  virtual WorkPtr all_gather(const Tensor& input, Tensor& output);
  virtual WorkPtr broadcast(Tensor& tensor, int root);
  virtual WorkPtr send(const Tensor& tensor, int dst, int tag = 0);
  virtual WorkPtr recv(Tensor& tensor, int src, int tag = 0);
  virtual WorkPtr barrier();

  // Collective over this group (MPI_Comm_split semantics): members passing the same color
  // form one new group, ordered by key (ties by rank); color < 0 gets nullptr.
  virtual std::shared_ptr<ProcessGroup> split_by_color(int color, int key, std::string name);
  // A group of the members listed (group ranks of this group, in their new order). Called by
  // every member of this group with the same list; members not listed get nullptr.
  std::shared_ptr<ProcessGroup> split(const std::vector<int>& ranks, std::string name);

  // The backend's name ("mpi", "nccl") for messages.
  virtual std::string backend() const = 0;

 protected:
  ProcessGroup(std::string name, int rank, int size, std::vector<int> world_ranks);
  [[noreturn]] void unsupported(const char* op) const;

 private:
  std::string name_;
  int rank_;
  int size_;
  std::vector<int> world_ranks_;
  std::chrono::milliseconds timeout_{std::chrono::minutes(5)};
};

using ProcessGroupPtr = std::shared_ptr<ProcessGroup>;

}  // namespace braid::dist
