// Fault scenario: the last rank does not issue one all_reduce. Every other rank must fail after
// the timeout with an error naming the op, its sequence number and the missing rank, and the
// job must then end (abort_job) instead of hanging. Run by ctest through expect_failure.sh.
//
//   fault_skip_collective sleep   the missing rank sleeps past the timeout
//   fault_skip_collective mpi     the missing rank is blocked inside another MPI call (a
//                                 receive nobody sends), so only the control thread can answer
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "braid/core/tensor.h"
#include "braid/dist/bootstrap.h"

namespace {

constexpr auto kTimeout = std::chrono::seconds(3);
constexpr int kSkippedStep = 2;  // steps 0 and 1 are sequence numbers 1 and 2

void run(braid::dist::Environment& env, const std::string& mode) {
  auto world = env.world();
  world->set_timeout(kTimeout);
  const int victim = env.world_size() - 1;
  braid::Tensor t = braid::Tensor::full({16}, 1.0f);
  for (int step = 0; step < 5; ++step) {
    if (step == kSkippedStep && env.world_rank() == victim) {
      if (mode == "mpi") {
        int value = 0;
        MPI_Recv(&value, 1, MPI_INT, 0, 99, MPI_COMM_SELF, MPI_STATUS_IGNORE);
      } else {
        std::this_thread::sleep_for(kTimeout * 5);
      }
    }
    world->all_reduce(t)->wait();
  }
}

}  // namespace

int main(int argc, char** argv) {
  int rank = -1;
  try {
    braid::dist::Environment& env = braid::dist::init(&argc, &argv);
    rank = env.world_rank();
    BRAID_CHECK(env.world_size() >= 2, "fault_skip_collective needs at least 2 ranks");
    run(env, argc > 1 ? argv[1] : "sleep");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: error: %s\n", rank, e.what());
    std::fflush(stderr);
    braid::dist::abort_job(3);
  }
  return 0;
}
