#include "core/status.h"

namespace brigade {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::ok: return "ok";
    case StatusCode::invalid_argument: return "invalid_argument";
    case StatusCode::not_found: return "not_found";
    case StatusCode::corrupt: return "corrupt";
    case StatusCode::unsupported: return "unsupported";
    case StatusCode::out_of_resources: return "out_of_resources";
    case StatusCode::io_error: return "io_error";
    case StatusCode::cancelled: return "cancelled";
    case StatusCode::internal: return "internal";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(status_code_name(code_)) + ": " + message_;
}

void check_failed(const char* cond, const char* why, const char* file, int line) {
  std::fprintf(stderr, "brigade: invariant failed at %s:%d: %s (%s)\n", file, line, cond, why);
  std::fflush(stderr);
  std::abort();
}

}  // namespace brigade
