// The plain parts of include/brigade/station.h: label lookup, typed option reads, and the table
// of brigade's own station types.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "actors/station/rate_limit.h"
#include "actors/station/request_log.h"
#include "brigade/station.h"

namespace brigade {

std::string StationRequest::label(const std::string& key) const {
  if (!labels) return {};
  for (const auto& [k, v] : *labels)
    if (k == key) return v;
  return {};
}

Expected<std::string> StationSpec::get_string(const std::string& key, const std::string& fallback) const {
  auto it = options.find(key);
  return it == options.end() ? fallback : it->second;
}

Expected<double> StationSpec::get_number(const std::string& key, double fallback) const {
  auto it = options.find(key);
  if (it == options.end()) return fallback;
  const char* text = it->second.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text, &end);
  if (it->second.empty() || end != text + it->second.size() || errno == ERANGE || !std::isfinite(v))
    return invalid_argument("option " + key + " must be a number (got '" + it->second + "')");
  return v;
}

Expected<bool> StationSpec::get_bool(const std::string& key, bool fallback) const {
  auto it = options.find(key);
  if (it == options.end()) return fallback;
  if (it->second == "true") return true;
  if (it->second == "false") return false;
  return invalid_argument("option " + key + " must be true or false (got '" + it->second + "')");
}

Status StationSpec::check_options(const std::vector<std::string>& valid) const {
  for (const auto& [key, value] : options) {
    if (std::find(valid.begin(), valid.end(), key) != valid.end()) continue;
    std::string list;
    for (const auto& v : valid) list += (list.empty() ? "" : ", ") + v;
    return invalid_argument("unknown option '" + key + "' for a " + type + " station (valid options: " +
                            (list.empty() ? "none" : list) + ")");
  }
  return Status::ok();
}

const std::map<std::string, StationFactory>& builtin_station_types() {
  static const std::map<std::string, StationFactory> types = {
      {"rate_limit", make_rate_limit_station},
      {"request_log", make_request_log_station},
  };
  return types;
}

}  // namespace brigade
