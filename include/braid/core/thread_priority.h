// Background threads that only use the CPU the training threads leave idle.
#pragma once

namespace braid {

// Moves the calling thread to the idle scheduling class (Linux SCHED_IDLE): it then runs only
// when a core would otherwise sit idle (a training thread waiting at a barrier, on memory it
// blocks for, or for this thread itself), instead of taking a time slice from a training
// thread, which on a core shared with an OpenMP team stalls the whole team at its next
// barrier. False where the system has no such class (the thread keeps its priority).
bool run_at_idle_priority();

}  // namespace braid
