// Builds the message of braid::Error: the caller's text followed by where it was raised.
#include "braid/core/error.h"

namespace braid {

void throw_error(const char* file, int line, const std::string& message) {
  std::string where = file;
  // Keep only the path from the project's top folders so messages stay short.
  for (const char* top : {"/src/", "/include/", "/kernels/", "/examples/", "/tests/", "/tools/"}) {
    if (auto pos = where.rfind(top); pos != std::string::npos) {
      where = where.substr(pos + 1);
      break;
    }
  }
  throw Error(fmt::format("{} ({}:{})", message, where, line));
}

}  // namespace braid
