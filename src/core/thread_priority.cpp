// run_at_idle_priority: SCHED_IDLE for the calling thread on Linux.
#include "braid/core/thread_priority.h"

#include <sched.h>

namespace braid {

bool run_at_idle_priority() {
#if defined(__linux__) && defined(SCHED_IDLE)
  sched_param param{};
  param.sched_priority = 0;
  // pid 0: the calling thread (Linux schedules threads, not processes). Lowering one's own
  // priority needs no privilege.
  return sched_setscheduler(0, SCHED_IDLE, &param) == 0;
#else
  return false;
#endif
}

}  // namespace braid
