// Logging set-up: one spdlog logger ("brigade") to stderr; level from BRIGADE_LOG_LEVEL
// (trace, debug, info, warn, error, off; default warn) unless set explicitly.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

namespace brigade {

// Idempotent; safe to call from several threads.
void init_logging();
// Sets the level by name; returns false (level unchanged) for an unknown name.
bool set_log_level(std::string_view level);

}  // namespace brigade
