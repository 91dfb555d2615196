// Fault scenario on the emulated device: the last rank does not issue one all_reduce of an
// NcclProcessGroup (stand-in transport). Every other rank must fail after the timeout with the
// engine's diagnosis, the same as the MPI backend's (op, sequence number, the rank that never
// joined), and the job must then end (abort_job) instead of hanging. Run through
// tests/dist/expect_failure.sh.
#include <chrono>
#include <cstdio>
#include <thread>

#include "braid/core/tensor.h"
#include "braid/dist/bootstrap.h"
#include "cuda_runtime.cuh"
#include "dist/nccl_process_group.h"

namespace {

constexpr auto kTimeout = std::chrono::seconds(3);
constexpr int kSkippedStep = 2;  // steps 0 and 1 are sequence numbers 1 and 2

void run(braid::dist::Environment& env) {
  braid::cuda::ensure_registered();
  auto group = braid::dist::NcclProcessGroup::create(env.world(), 0, "nccl-world");
  group->set_timeout(kTimeout);
  const int victim = env.world_size() - 1;
  braid::Tensor t = braid::Tensor::full({16}, 1.0f).to(braid::Device::cuda(0));
  for (int step = 0; step < 5; ++step) {
    if (step == kSkippedStep && env.world_rank() == victim)
      std::this_thread::sleep_for(kTimeout * 5);
    group->all_reduce(t)->wait();
  }
}

}  // namespace

int main(int argc, char** argv) {
  int rank = -1;
  try {
    braid::dist::Environment& env = braid::dist::init(&argc, &argv);
    rank = env.world_rank();
    BRAID_CHECK(env.world_size() >= 2, "fault_standin_skip needs at least 2 ranks");
    run(env);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: error: %s\n", rank, e.what());
    std::fflush(stderr);
    braid::dist::abort_job(3);
  }
  return 0;
}
