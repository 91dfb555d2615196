// The library's one logger (spdlog): lines carry a rank/grid prefix; level from BRAID_LOG_LEVEL.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace braid {

// The shared logger, created on first use with the level from BRAID_LOG_LEVEL
// (trace, debug, info, warn, error; default info).
spdlog::logger& log();

// Sets the prefix every line carries, e.g. "[rank 3 tp=1 dp=1]". Empty: no prefix.
void set_log_prefix(const std::string& prefix);

}  // namespace braid
