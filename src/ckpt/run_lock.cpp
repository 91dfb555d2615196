// RunLock: flock on <dir>/lock, shared within the process, naming its holder to other runs.
#include "braid/ckpt/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "braid/core/logging.h"

namespace braid::ckpt {
namespace {

namespace fs = std::filesystem;

// Locks this process holds, by canonical folder: flock conflicts between two descriptors of
// one process too, so a second acquire must reuse the first lock.
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, std::weak_ptr<RunLock>>& registry() {
  static std::map<std::string, std::weak_ptr<RunLock>> locks;
  return locks;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

}  // namespace

std::string RunLock::holder(const std::string& dir) {
  std::ifstream in(fs::path(dir) / kLockFile);
  std::string pid_word, pid, on, host_word, host;
  in >> pid_word >> pid >> on >> host_word >> host;
  if (pid_word != "pid" || pid.empty() || host.empty())
    return "another process (its lock file names no pid and host yet)";
  return fmt::format("pid {} on host {}", pid, host);
}

std::shared_ptr<RunLock> RunLock::acquire(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  BRAID_CHECK(!ec, "cannot create checkpoint dir {}: {}", dir, ec.message());
  const std::string key = fs::weakly_canonical(dir).string();
  std::lock_guard<std::mutex> guard(registry_mutex());
  if (auto held = registry()[key].lock()) return held;
  const fs::path file = fs::path(dir) / kLockFile;
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  BRAID_CHECK(fd >= 0, "cannot open the lock file {}: {}", file.string(), std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    ::close(fd);
    if (error == EWOULDBLOCK)
      throw DirectoryInUse(fmt::format("checkpoint dir {} is in use by {}", dir, holder(dir)));
    BRAID_FAIL("cannot lock {}: {}", file.string(), std::strerror(error));
  }
  const std::string who = fmt::format("pid {} on host {}\n", ::getpid(), host_name());
  // The lock itself is the flock; the text only names the holder in other runs' messages.
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, who.data(), who.size(), 0) < 0)
    log().warn("cannot record this run in {}: {}", file.string(), std::strerror(errno));
  std::shared_ptr<RunLock> lock(new RunLock(dir, fd));
  registry()[key] = lock;
  return lock;
}

RunLock::~RunLock() {
  // Closing the descriptor releases the flock; the file stays (removing it would let a run
  // that opened it just before lock a file no one else can see).
  ::close(fd_);
}

}  // namespace braid::ckpt
