// Stations: your own actors in an engine's request path (DESIGN.md §10, "may add its own actors
// to the topology").
//
// A topology's `stations:` list puts one actor per entry between the tokenizer and the
// scheduler (or the router of several instances):
//
//   tokenizer ──▶ station[0] ──▶ station[1] ──▶ router | scheduler
//       ▲             │ ▲            │ ▲                  │
//       └─────────────┘ └────────────┘ └── TokenEvents ───┘
//
// Every tokenized request passes each station in list order on its way in, and every event of
// it passes them in reverse order on its way out. A station may change a request's priority or
// lower its max_tokens, hold it (and later release or reject it), reject it at once, cancel a
// running request, and set timers; it sees each request's events (ids, counts, finish, error).
// brigade hosts the Station object in an actor of its own: every method and every timer callback
// of one station runs on that actor, one at a time, so a station needs no locks for its own
// state. An actor is cooperative unless the entry says `detached: true` (then it has a thread of
// its own and may block, e.g. on I/O).
//
// A station type is a factory registered in EngineOptions::station_types under the name the
// topology's `type:` uses; brigade's own types (rate_limit, request_log: docs/architecture.md
// "Stations") need no registration. A topology naming an unknown type is refused at
// Engine::create with the list of known types.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace brigade {

// A request on its way in. `priority` and `max_tokens` may be changed by on_request (max_tokens
// only lowered, to >= 1: a larger value is clamped back); the rest is read-only.
struct StationRequest {
  uint64_t id = 0;
  std::span<const int32_t> prompt_ids;  // valid during on_request only
  int max_tokens = 0;
  int priority = 0;
  // GenerateOptions::labels (the server sets "user" from OpenAI's `user` field).
  const std::vector<std::pair<std::string, std::string>>* labels = nullptr;
  // The value of a label, or "" when the request has none by that key.
  std::string label(const std::string& key) const;
};

// An event of a request on its way out. Text is not known yet here (the tokenizer, upstream of
// every station, adds it), nor are stop strings applied: a request the tokenizer ends at a stop
// string shows its later events as finish abort (the tokenizer's abort) after one of stop.
enum class StationFinish { none, stop, length, abort, error };
struct StationEvent {
  uint64_t id = 0;
  int n_new_tokens = 0;        // ids in this event
  int prompt_tokens = 0;
  int completion_tokens = 0;   // generated so far
  StationFinish finish = StationFinish::none;  // != none: the request's last event
  std::string_view error;      // when finish == error
};

// What on_request decides.
struct StationVerdict {
  enum class Action { pass, hold, reject };
  Action action = Action::pass;
  StatusCode code = StatusCode::ok;  // reject: the error's code (out_of_resources: HTTP 429)
  std::string message;               // reject: what the client reads
  int64_t retry_after_ms = 0;        // reject: when the client may retry (Event::retry_after_ms,
                                     // the server's Retry-After header); 0 = not said

  static StationVerdict pass() { return {}; }
  // Keep the request here until StationContext::release or ::reject names it.
  static StationVerdict hold() { return {Action::hold, StatusCode::ok, {}, 0}; }
  static StationVerdict reject(StatusCode code, std::string message, int64_t retry_after_ms = 0) {
    return {Action::reject, code, std::move(message), retry_after_ms};
  }
};

// What a station can do besides answering on_request. Valid only inside a Station method or a
// timer callback of the same station (it is the hosting actor).
class StationContext {
 public:
  virtual ~StationContext() = default;
  // A held request goes on downstream (with the priority / max_tokens its on_request left).
  // Ids not held here are ignored.
  virtual void release(uint64_t id) = 0;
  // A held request ends with one error event (code, message and retry_after_ms as
  // StationVerdict::reject). Ids not held here are ignored.
  virtual void reject(uint64_t id, StatusCode code, std::string message, int64_t retry_after_ms = 0) = 0;
  // A request past this station is aborted downstream (its last event comes back as finish
  // abort). For a held request, use reject.
  virtual void cancel(uint64_t id) = 0;
  // Runs `fn` on this station after `delay` (no sooner). Timers of a stopped engine never run.
  virtual void after(std::chrono::milliseconds delay, std::function<void()> fn) = 0;
  // Requests held here now.
  virtual size_t n_held() const = 0;
};

class Station {
 public:
  virtual ~Station() = default;
  // Each request once, in arrival order.
  virtual StationVerdict on_request(StationRequest& request, StationContext& ctx) = 0;
  // Each event of a request that passed this station, in order; the last has finish != none.
  virtual void on_event(const StationEvent& event, StationContext& ctx) {
    (void)event;
    (void)ctx;
  }
  // The client cancelled a request this station holds (it is dropped; its abort event goes out)
  // or passed (the abort goes on downstream; its last event follows through on_event).
  virtual void on_cancel(uint64_t id, bool was_held, StationContext& ctx) {
    (void)id;
    (void)was_held;
    (void)ctx;
  }
};

// One `stations:` entry as the factory sees it. `options` holds the entry's `options:` mapping,
// scalars as written (numbers and booleans as their text).
struct StationSpec {
  std::string name;
  std::string type;
  std::map<std::string, std::string> options;

  // Typed reads of options; an absent key gives the default. Errors name the station and key.
  Expected<std::string> get_string(const std::string& key, const std::string& fallback) const;
  Expected<double> get_number(const std::string& key, double fallback) const;
  Expected<bool> get_bool(const std::string& key, bool fallback) const;
  // invalid_argument naming the first option that is not in `valid` (listing them), else ok.
  Status check_options(const std::vector<std::string>& valid) const;
};

// Makes a station from its spec (called once per entry at Engine::create; an error there fails
// the create, prefixed with the station's name).
using StationFactory = std::function<Expected<std::unique_ptr<Station>>(const StationSpec&)>;

// brigade's own station types by name ("rate_limit", "request_log").
const std::map<std::string, StationFactory>& builtin_station_types();

}  // namespace brigade
