// Fault scenario: one rank kills itself (SIGKILL) in the middle of a loop of all_reduces. The
// launcher must tear the job down: the survivors have to exit non-zero shortly after, well
// within the collective timeout plus slack. Run by ctest through expect_failure.sh.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include "braid/core/tensor.h"
#include "braid/dist/bootstrap.h"

int main(int argc, char** argv) {
  int rank = -1;
  try {
    braid::dist::Environment& env = braid::dist::init(&argc, &argv);
    rank = env.world_rank();
    auto world = env.world();
    world->set_timeout(std::chrono::seconds(10));
    const int victim = env.world_size() / 2;
    braid::Tensor t = braid::Tensor::full({1024}, 1.0f);
    for (int step = 0; step < 100000; ++step) {
      if (step == 20 && rank == victim) {
        const auto now = std::chrono::system_clock::now().time_since_epoch();
        std::fprintf(stderr, "rank %d: raising SIGKILL at step %d (epoch %.3f s)\n", rank, step,
                     std::chrono::duration<double>(now).count());
        std::fflush(stderr);
        std::raise(SIGKILL);
      }
      world->all_reduce(t)->wait();
      t.fill_(1.0f);
      if (step > 200) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::fprintf(stderr, "rank %d: finished the loop, which a killed peer should prevent\n", rank);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: error: %s\n", rank, e.what());
    std::fflush(stderr);
    braid::dist::abort_job(3);
  }
  return 0;
}
