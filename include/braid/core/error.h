// braid::Error and the BRAID_CHECK family: every failure in the library throws, with file:line.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace braid {

// The one exception type the library throws; `what()` is a single human-readable line.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_error(const char* file, int line, const std::string& message);

}  // namespace braid

// BRAID_CHECK(cond, "fmt {}", args...) throws braid::Error naming file:line when cond is false.
#define BRAID_CHECK(cond, ...)                                                       \
  do {                                                                               \
    if (!(cond)) ::braid::throw_error(__FILE__, __LINE__, fmt::format(__VA_ARGS__)); \
  } while (0)

#define BRAID_FAIL(...) ::braid::throw_error(__FILE__, __LINE__, fmt::format(__VA_ARGS__))

// One check for every status-code API (CUDA, cuBLAS, cuDNN, NCCL, MPI): `ok` is the success
// value and `describe(status)` turns a failing status into text.
#define BRAID_CHECK_STATUS(expr, ok, describe)                                            \
  do {                                                                                    \
    auto braid_status_ = (expr);                                                          \
    if (braid_status_ != (ok))                                                            \
      ::braid::throw_error(__FILE__, __LINE__,                                            \
                           fmt::format("{} failed: {}", #expr, describe(braid_status_))); \
  } while (0)
