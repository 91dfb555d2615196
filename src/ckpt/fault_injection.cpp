// Parses BRAID_CKPT_FAULT once and answers whether a crash point fires.
#include "fault_injection.h"

#include <csignal>
#include <cstdlib>
#include <string>

#include "braid/core/logging.h"

namespace braid::ckpt {
namespace {

struct Fault {
  std::string point;
  int64_t step = -1;
  int rank = -1;  // -1: every rank
};

const Fault& requested() {
  static const Fault fault = [] {
    Fault f;
    const char* env = std::getenv("BRAID_CKPT_FAULT");
    if (!env || !*env) return f;
    const std::string spec = env;
    const size_t a = spec.find(':');
    const size_t b = a == std::string::npos ? a : spec.find(':', a + 1);
    f.point = spec.substr(0, a);
    if (a != std::string::npos) f.step = std::stoll(spec.substr(a + 1, b - a - 1));
    if (b != std::string::npos) f.rank = std::stoi(spec.substr(b + 1));
    return f;
  }();
  return fault;
}

}  // namespace

bool fault_requested(std::string_view point, int64_t step, int rank) {
  const Fault& f = requested();
  return !f.point.empty() && f.point == point && f.step == step && (f.rank < 0 || f.rank == rank);
}

void crash_if_requested(std::string_view point, int64_t step, int rank) {
  if (!fault_requested(point, step, rank)) return;
  log().warn("fault injection: killing rank {} at checkpoint {} point {}", rank, step, point);
  std::raise(SIGKILL);
}

}  // namespace braid::ckpt
