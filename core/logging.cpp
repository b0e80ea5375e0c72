#include "core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <mutex>

namespace brigade {

void init_logging() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto logger = spdlog::stderr_color_mt("brigade");
    spdlog::set_default_logger(logger);
    spdlog::set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
    spdlog::set_level(spdlog::level::warn);
    if (const char* env = std::getenv("BRIGADE_LOG_LEVEL")) set_log_level(env);
  });
}

bool set_log_level(std::string_view level) {
  auto lv = spdlog::level::from_str(std::string(level));
  if (lv == spdlog::level::off && level != "off") return false;
  spdlog::set_level(lv);
  return true;
}

}  // namespace brigade
