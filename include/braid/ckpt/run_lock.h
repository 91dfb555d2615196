// The run lock of a checkpoint directory: one training run per folder, so that a second run
// started on it by mistake stops at once instead of interleaving its checkpoints with the first's.
#pragma once

#include <memory>
#include <string>

#include "braid/core/error.h"

namespace braid::ckpt {

// Thrown when another process holds the lock; what() is
// "checkpoint dir X is in use by pid N on host H". Binaries exit with status 2 on it.
class DirectoryInUse : public Error {
 public:
  using Error::Error;
};

// An exclusive lock on <dir>/lock (flock), held while the object lives and released by the
// kernel when the process dies, kill -9 included, so a crash never leaves a stale lock. The
// file records the holder's pid and host for the message a second run prints. Within one
// process the lock is shared: acquiring a folder this process holds returns the same lock.
class RunLock {
 public:
  // Creates `dir` if needed and takes its lock; throws DirectoryInUse naming the holder.
  static std::shared_ptr<RunLock> acquire(const std::string& dir);
  // Who holds the lock of `dir` according to its file: "pid N on host H" (or a note that the
  // file names no holder).
  static std::string holder(const std::string& dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  const std::string& dir() const { return dir_; }

 private:
  RunLock(std::string dir, int fd) : dir_(std::move(dir)), fd_(fd) {}
  std::string dir_;
  int fd_;
};

// The name of the lock file inside a checkpoint directory; never removed by braid.
constexpr const char* kLockFile = "lock";

}  // namespace braid::ckpt
