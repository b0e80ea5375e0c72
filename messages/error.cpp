#include "messages/error.h"

#include <string>

#include <caf/message.hpp>
#include <caf/sec.hpp>

namespace brigade {
namespace {

// Highest StatusCode value; codes above it in a "brigade" error came from a newer peer or a bug.
constexpr auto max_status_code = static_cast<uint8_t>(StatusCode::internal);

std::string context_text(const caf::message& context) {
  if (context.size() == 1 && context.match_element<std::string>(0)) {
    return context.get_as<std::string>(0);
  }
  return context.empty() ? std::string() : caf::to_string(context);
}

}  // namespace

caf::error to_caf_error(const Status& status) {
  if (status.is_ok()) return caf::error();
  return caf::error(static_cast<uint8_t>(status.code()), error_category,
                    caf::make_message(status.message()));
}

Status to_status(const caf::error& error) {
  if (!error) return Status::ok();
  if (error.category() == error_category && error.code() != 0 && error.code() <= max_status_code) {
    return Status(static_cast<StatusCode>(error.code()), context_text(error.context()));
  }
  return internal_error("actor error: " + caf::to_string(error));
}

std::string render_error(uint8_t code, caf::atom_value category, const caf::message& context) {
  if (category != error_category || code == 0 || code > max_status_code) {
    return "brigade: unknown error code " + std::to_string(code);
  }
  return Status(static_cast<StatusCode>(code), context_text(context)).to_string();
}

}  // namespace brigade
