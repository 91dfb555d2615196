// Process start-up and shut-down for distributed runs: MPI initialisation, this rank's place in
// the job and on its node, the world group, CPU threads per rank, and ending a failed job.
//
// Launching:
// - `mpirun -np N bin ...` starts N ranks. Under Open MPI as root add --allow-run-as-root; on an
//   oversubscribed machine (more ranks than cores) add --oversubscribe.
// - `srun -n N bin ...` (Slurm) works the same way: Open MPI picks the ranks up from PMIx in
//   MPI_Init, so nothing else is needed beyond launching with the PMIx plugin
//   (`srun --mpi=pmix`, often the site default).
// - A binary started alone (no launcher) is a world of size 1: Open MPI's singleton init
//   starts it as a one-rank job. This was verified with Open MPI 4.1 on Debian; no fallback
//   without MPI is built in, so MPI must be installed wherever braid runs.
//
// A rank that dies (kill -9, a crash) under mpirun: the launcher notices and kills the other
// ranks; with Open MPI 4.1 the whole job ended about one second after the kill, mpirun exiting
// with 137 (tests/dist/fault_kill_rank.cpp checks this). Survivors blocked in a collective do
// not need braid for that; their collective timeout is the backstop under launchers that do not
// tear jobs down.
//
// Threads: MPI is initialised with MPI_THREAD_MULTIPLE (each group's progress thread and the
// control thread call MPI concurrently with the caller); a library providing less is an error.
// When OMP_NUM_THREADS is unset, each rank uses max(1, usable cores / ranks on this node)
// OpenMP threads so ranks sharing a node do not oversubscribe it.
//
// The control channel: init() also duplicates MPI_COMM_WORLD into a private control
// communicator serviced by one background thread per process. It answers other ranks'
// questions about this rank's groups ("your last sequence number in group G?") and watches
// every group's timeout, so that a timed-out collective can name the ranks that never joined
// even while those ranks are blocked inside another MPI call.
#pragma once

#include "braid/dist/process_group.h"

namespace braid::dist {

class Environment {
 public:
  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  // Rank and number of ranks on this node (MPI_COMM_TYPE_SHARED).
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  // OpenMP threads this rank uses (set by init() when OMP_NUM_THREADS is unset).
  int threads_per_rank() const { return threads_per_rank_; }
  // The MPI group over all ranks, named "world"; its timeout is default_collective_timeout().
  const ProcessGroupPtr& world() const { return world_; }

 private:
  friend Environment& init(int* argc, char*** argv);
  friend void finalize();
  int world_rank_ = 0;
  int world_size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  int threads_per_rank_ = 1;
  ProcessGroupPtr world_;
};

// Initialises MPI (once; later calls return the same Environment, and an MPI the caller already
// initialised with MPI_THREAD_MULTIPLE is adopted and left for the caller to finalise).
// argc/argv may be null. Registers finalize() to run at normal exit. Throws braid::Error when
// MPI cannot provide MPI_THREAD_MULTIPLE or when called after finalize().
Environment& init(int* argc, char*** argv);
bool initialized();
// The Environment of init(); throws when init() has not run.
Environment& environment();

// Shuts every MPI group down (their queued operations finish or time out first), stops the
// control thread and finalises MPI. Idempotent; a no-op without init(). When a progress thread
// is still stuck inside a timed-out MPI call, MPI_Finalize is skipped (it would hang) and the
// launcher will report the rank as exiting without finalising.
void finalize();

// Ends the whole job now: flushes the log and calls MPI_Abort on MPI_COMM_WORLD, which makes
// mpirun/srun kill every rank. The only place braid aborts; meant for a binary's main after
// it caught an error that leaves the ranks out of step (a timed-out or failed collective).
// Without MPI initialised it exits the process with `code`.
[[noreturn]] void abort_job(int code);

}  // namespace braid::dist
