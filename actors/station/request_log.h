// The `request_log` station: one JSON line per finished request (vLLM's request logging, as data).
//
//   stations:
//     - type: request_log
//       options: {path: /var/log/brigade/requests.jsonl}   # absent: brigade's log at info level
//                                                          # (BRIGADE_LOG_LEVEL; an embedding program logs warn and up by default)
//
// A line: {"id", "labels": {k: v}, "prompt_tokens", "max_tokens", "priority", "completion_tokens",
// "finish" (stop|length|abort|error), "error" (when finish is error), "first_token_ms" (from
// arrival here to the first generated token; absent when none came), "total_ms" (arrival to the
// last event)}. Put it first in `stations:` for times that include the waits of the stations
// after it (a rate_limit queue). The file is opened for appending at start; lines are written
// whole and flushed, so a crash loses none that were logged. A write error is logged once and
// logging stops; serving goes on.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "brigade/station.h"

namespace brigade {

// What is known of a request when it ends (RequestLogStation's record).
struct RequestRecord {
  uint64_t id = 0;
  std::vector<std::pair<std::string, std::string>> labels;
  int prompt_tokens = 0, max_tokens = 0, priority = 0, completion_tokens = 0;
  StationFinish finish = StationFinish::none;
  std::string error;
  double first_token_ms = -1;  // < 0: no token came
  double total_ms = 0;
};

// The record as one JSON object on one line (no trailing newline).
std::string request_log_line(const RequestRecord& r);

Expected<std::unique_ptr<Station>> make_request_log_station(const StationSpec& spec);

}  // namespace brigade
