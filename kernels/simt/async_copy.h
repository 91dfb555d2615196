// The emulated cp.async: copies into shared memory stay in flight until the thread waits for
// their group, and touching their destination meanwhile is a fault (a missing wait).
//
// INTERFACE between the emulator's parts: implemented by kernels/simt/async_copy.cpp,
// used by the emulated bodies of kernels/device_intrinsics.cuh.
#pragma once

#include <cstddef>
#include <source_location>

namespace braid::simt {

// Issues an asynchronous copy of `bytes` from global `src` to shared `dst` for the calling
// thread: the destination is marked in flight (reads and writes of it are faults) and nothing is
// copied yet. `src` is checked (bounds, initialisation) now, as the hardware reads it, when it is
// device memory (the zero-filled tail of a src-size copy comes from a host constant).
void async_copy_issue(void* dst, const void* src, size_t bytes,
                      const std::source_location& site = std::source_location::current());
// cp.async.commit_group: the calling thread's copies issued since the last commit form a group.
void async_copy_commit();
// cp.async.wait_group n: performs the calling thread's committed groups except the newest `n`
// (copies the bytes, clears the in-flight marks). wait_all: n = 0 plus the uncommitted copies.
void async_copy_wait(int n);
void async_copy_wait_all();

}  // namespace braid::simt
