// StopSignals: a first SIGTERM/SIGINT/SIGUSR1 is recorded for the training loop, a second one
// takes the default action (the process ends at once).
#include "braid/train/stop_signals.h"

#include <unistd.h>

#include <atomic>
#include <cstring>

#include "braid/core/error.h"

namespace braid::train {
namespace {

constexpr int kSignals[3] = {SIGTERM, SIGINT, SIGUSR1};
static_assert(std::atomic<int>::is_always_lock_free, "the handler stores into an atomic int");
std::atomic<int> g_received{0};

void on_signal(int signal) {
  if (g_received.exchange(signal) != 0) {
    // Second signal: end now, with the status the default action gives.
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(signal, &dfl, nullptr);
    raise(signal);
    return;
  }
  // write(2) is async-signal-safe; the message says what happens and how to skip it.
  static constexpr char kNote[] =
      "braid: stop requested; finishing this step and writing a checkpoint (signal again to exit "
      "at once)\n";
  [[maybe_unused]] const ssize_t n = write(STDERR_FILENO, kNote, sizeof(kNote) - 1);
}

}  // namespace

StopSignals::StopSignals() {
  g_received.store(0);
  struct sigaction action = {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking calls resume; the loop checks between steps
  for (int i = 0; i < 3; ++i)
    BRAID_CHECK(sigaction(kSignals[i], &action, &previous_[i]) == 0,
                "cannot install the {} handler: {}", signal_name(kSignals[i]),
                std::strerror(errno));
}

StopSignals::~StopSignals() {
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &previous_[i], nullptr);
}

int StopSignals::received() {
  return g_received.load(std::memory_order_relaxed);
}

std::string signal_name(int signal) {
  switch (signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return "signal " + std::to_string(signal);
  }
}

}  // namespace braid::train
