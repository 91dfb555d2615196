// The shared spdlog logger and its prefix.
#include "braid/core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <mutex>

namespace braid {
namespace {

std::shared_ptr<spdlog::logger> make_logger() {
  auto logger = spdlog::stderr_color_mt("braid");
  const char* level = std::getenv("BRAID_LOG_LEVEL");
  logger->set_level(level ? spdlog::level::from_str(level) : spdlog::level::info);
  logger->set_pattern("%H:%M:%S %^%L%$ %v");
  return logger;
}

}  // namespace

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = make_logger();
  return *logger;
}

void set_log_prefix(const std::string& prefix) {
  log().set_pattern(prefix.empty() ? "%H:%M:%S %^%L%$ %v" : "%H:%M:%S %^%L%$ " + prefix + " %v");
}

}  // namespace braid
