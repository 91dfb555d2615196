// Graceful stop: SIGTERM, SIGINT and SIGUSR1 become a request to stop after the current step
// (Slurm sends SIGTERM before a time limit or preemption; Open MPI's mpirun forwards SIGUSR1
// to the ranks but kills them 1 s after forwarding SIGTERM or SIGINT). A second signal exits at
// once, as if no handler were installed.
#pragma once

#include <csignal>
#include <string>

namespace braid::train {

// Exit status of a binary that stopped on such a signal after checkpointing: EX_TEMPFAIL,
// "try again later", since a rerun resumes where it stopped.
constexpr int kExitStoppedBySignal = 75;

// Installs the handlers while it lives and restores the previous ones after. Not nestable
// across threads: one per process at a time (the Trainer's fit() holds one).
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The first signal received since the newest StopSignals was installed (0: none).
  static int received();

 private:
  struct sigaction previous_[3];
};

// "SIGTERM", "SIGINT", "SIGUSR1", or "signal N".
std::string signal_name(int signal);

}  // namespace braid::train
