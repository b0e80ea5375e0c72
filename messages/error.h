// Status <-> caf::error at actor boundaries (STYLE.md §5: no exception crosses an actor boundary;
// run-time errors travel as caf::error between actors and as Status inside them).
//
// A Status becomes a caf::error of category "brigade" whose code is the StatusCode and whose
// context is the message; to_status inverts that exactly. Errors of other categories (CAF's own:
// timeouts, dead receivers, unexpected messages) map to StatusCode::internal, with CAF's rendering
// of the error as the message.
#pragma once

#include <caf/atom.hpp>
#include <caf/error.hpp>

#include "core/status.h"

namespace brigade {

// The category atom of errors made from a Status.
constexpr caf::atom_value error_category = caf::atom("brigade");

// Converts a non-OK Status; an OK Status becomes an empty caf::error (no error).
caf::error to_caf_error(const Status& status);

// Converts a caf::error; an empty caf::error becomes an OK Status.
Status to_status(const caf::error& error);

// Renders a "brigade" error as Status::to_string would ("corrupt: ..."). Registered with
// actor_system_config::add_error_category by register_message_types.
std::string render_error(uint8_t code, caf::atom_value category, const caf::message& context);

}  // namespace brigade
