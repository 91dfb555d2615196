// init/finalize of MPI for braid, the node-local layout, OpenMP threads per rank, abort_job.
#include "braid/dist/bootstrap.h"

#include <mpi.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "braid/core/logging.h"
#include "braid/dist/collective_log.h"
#include "braid/dist/mpi_process_group.h"
#include "dist/mpi_runtime.h"

namespace braid::dist {
namespace {

using detail::MpiRuntime;

std::mutex g_mutex;
Environment* g_env = nullptr;  // never freed: user code may hold references past finalize()
bool g_finalized = false;
bool g_owns_mpi = false;  // false when the caller initialised MPI before init()

// How long finalize() waits for progress threads left inside timed-out MPI calls.
constexpr auto kStuckThreadGrace = std::chrono::seconds(2);

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// Ranks on one node would each start one OpenMP thread per core and fight over the cores; split the
// node instead. An explicit OMP_NUM_THREADS always wins.
int choose_threads(int local_size, int world_rank) {
  if (const char* env = std::getenv("OMP_NUM_THREADS"); env && *env) {
    const int threads = omp_get_max_threads();
    log().debug("OMP_NUM_THREADS={} set; {} OpenMP threads per rank", env, threads);
    return threads;
  }
  const int node_cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // A rank pinned to fewer cores (mpirun --bind-to core) cannot use more than it has.
  const int threads = std::max(1, std::min(usable_cores(), node_cores / local_size));
  omp_set_num_threads(threads);
  const auto level = world_rank == 0 ? spdlog::level::info : spdlog::level::debug;
  log().log(level,
            "OMP_NUM_THREADS unset: {} OpenMP threads per rank ({} cores on the node, {} usable by "
            "this rank, {} ranks on the node)",
            threads, node_cores, usable_cores(), local_size);
  return threads;
}

void finalize_at_exit() {
  try {
    finalize();
  } catch (const std::exception& e) {
    log().error("braid::dist::finalize at exit: {}", e.what());
  }
}

}  // namespace

Environment& init(int* argc, char*** argv) {
  std::lock_guard lock(g_mutex);
  if (g_env != nullptr) return *g_env;
  BRAID_CHECK(!g_finalized, "braid::dist::init() after finalize(): MPI cannot be restarted");
  // The logger is created before the atexit registration below, so it outlives finalize_at_exit.
  log();
  // A malformed BRAID_COLLECTIVE_TIMEOUT_S fails here, before MPI is touched.
  default_collective_timeout();

  int already = 0;
  MPI_Initialized(&already);
  int provided = MPI_THREAD_SINGLE;
  if (already) {
    MPI_Query_thread(&provided);
  } else {
    BRAID_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
    g_owns_mpi = true;
  }
  BRAID_CHECK(
      provided >= MPI_THREAD_MULTIPLE,
      "MPI provides thread level {} but braid needs MPI_THREAD_MULTIPLE ({}): progress and control "
      "threads call MPI concurrently. Use an MPI built with thread support (Debian's openmpi "
      "packages are){}",
      provided, MPI_THREAD_MULTIPLE,
      already ? "; MPI was initialised before braid::dist::init(), with a lower level" : "");

  auto env = std::make_unique<Environment>();
  BRAID_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &env->world_rank_));
  BRAID_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &env->world_size_));
  MPI_Comm local = MPI_COMM_NULL;
  BRAID_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, env->world_rank_,
                                      MPI_INFO_NULL, &local));
  BRAID_MPI_CHECK(MPI_Comm_rank(local, &env->local_rank_));
  BRAID_MPI_CHECK(MPI_Comm_size(local, &env->local_size_));
  MPI_Comm_free(&local);
  if (env->world_size_ > 1) set_log_prefix(fmt::format("[rank {}]", env->world_rank_));

  env->threads_per_rank_ = choose_threads(env->local_size_, env->world_rank_);
  MpiRuntime::start();
  env->world_ = std::make_shared<MpiProcessGroup>(MPI_COMM_WORLD, "world");
  if (env->world_rank_ == 0)
    log().info("braid::dist: {} ranks, MPI_THREAD_MULTIPLE, collective timeout {:.1f}s",
               env->world_size_, env->world_->timeout().count() / 1000.0);

  g_env = env.release();
  std::atexit(finalize_at_exit);
  return *g_env;
}

bool initialized() {
  std::lock_guard lock(g_mutex);
  return g_env != nullptr && !g_finalized;
}

Environment& environment() {
  std::lock_guard lock(g_mutex);
  BRAID_CHECK(g_env != nullptr, "braid::dist::init() has not been called");
  return *g_env;
}

void finalize() {
  std::lock_guard lock(g_mutex);
  if (g_env == nullptr || g_finalized) return;
  g_finalized = true;
  MpiRuntime& runtime = MpiRuntime::get();
  // Groups first: their queued operations may still need the control thread's watchdog.
  for (auto& group : runtime.groups()) group->shutdown();
  runtime.stop_control();
  const auto deadline = std::chrono::steady_clock::now() + kStuckThreadGrace;
  while (runtime.detached_in_mpi() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (runtime.detached_in_mpi() > 0) {
    // MPI_Finalize with a thread inside MPI would hang or crash; the launcher reports this rank as
    // exiting without finalising, which ends the job with an error, as it should.
    runtime.mark_finalized();
    log().error(
        "braid::dist::finalize: {} progress thread(s) still inside a timed-out MPI call; skipping "
        "MPI_Finalize (call braid::dist::abort_job after a collective error)",
        runtime.detached_in_mpi());
    log().flush();
    return;
  }
  runtime.mark_finalized();
  if (g_owns_mpi) {
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
  }
}

void abort_job(int code) {
  log().flush();
  int up = 0, down = 0;
  MPI_Initialized(&up);
  MPI_Finalized(&down);
  if (up && !down) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace braid::dist
