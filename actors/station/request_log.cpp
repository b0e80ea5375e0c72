#include "actors/station/request_log.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unordered_map>

namespace brigade {

namespace {

const char* finish_name(StationFinish f) {
  switch (f) {
    case StationFinish::none: return "none";
    case StationFinish::stop: return "stop";
    case StationFinish::length: return "length";
    case StationFinish::abort: return "abort";
    case StationFinish::error: return "error";
  }
  return "?";
}

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

class RequestLogStation final : public Station {
 public:
  explicit RequestLogStation(std::FILE* file, std::string path) : file_(file), path_(std::move(path)) {}
  ~RequestLogStation() override {
    if (file_) std::fclose(file_);
  }

  StationVerdict on_request(StationRequest& r, StationContext&) override {
    Open& o = open_[r.id];
    o.record.id = r.id;
    if (r.labels) o.record.labels = *r.labels;
    o.record.prompt_tokens = static_cast<int>(r.prompt_ids.size());
    o.record.max_tokens = r.max_tokens;
    o.record.priority = r.priority;
    o.arrived = Clock::now();
    return StationVerdict::pass();
  }

  void on_event(const StationEvent& ev, StationContext&) override {
    auto it = open_.find(ev.id);
    if (it == open_.end()) return;
    Open& o = it->second;
    const auto now = Clock::now();
    if (o.record.first_token_ms < 0 && ev.n_new_tokens > 0) o.record.first_token_ms = ms_between(o.arrived, now);
    if (ev.finish == StationFinish::none) return;
    o.record.completion_tokens = ev.completion_tokens;
    if (ev.prompt_tokens > 0) o.record.prompt_tokens = ev.prompt_tokens;
    o.record.finish = ev.finish;
    o.record.error = std::string(ev.error);
    o.record.total_ms = ms_between(o.arrived, now);
    write(request_log_line(o.record));
    open_.erase(it);
  }

 private:
  struct Open {
    RequestRecord record;
    Clock::time_point arrived;
  };

  void write(const std::string& line) {
    if (!file_) {
      if (path_.empty()) spdlog::info("request {}", line);
      return;
    }
    if (std::fprintf(file_, "%s\n", line.c_str()) < 0 || std::fflush(file_) != 0) {
      spdlog::error("request_log: writing '{}' failed; request logging stops (serving goes on)", path_);
      std::fclose(file_);
      file_ = nullptr;
    }
  }

  std::FILE* file_;   // null: spdlog (path_ empty) or stopped after an error
  std::string path_;
  std::unordered_map<uint64_t, Open> open_;
};

}  // namespace

std::string request_log_line(const RequestRecord& r) {
  nlohmann::ordered_json j;
  j["id"] = r.id;
  j["labels"] = nlohmann::ordered_json::object();
  for (const auto& [k, v] : r.labels) j["labels"][k] = v;
  j["prompt_tokens"] = r.prompt_tokens;
  j["max_tokens"] = r.max_tokens;
  j["priority"] = r.priority;
  j["completion_tokens"] = r.completion_tokens;
  j["finish"] = finish_name(r.finish);
  if (r.finish == StationFinish::error) j["error"] = r.error;
  if (r.first_token_ms >= 0) j["first_token_ms"] = std::round(r.first_token_ms * 1000.0) / 1000.0;
  j["total_ms"] = std::round(r.total_ms * 1000.0) / 1000.0;
  // Labels and errors come from clients: replace invalid UTF-8 rather than throw.
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

Expected<std::unique_ptr<Station>> make_request_log_station(const StationSpec& spec) {
  BRIGADE_RETURN_IF_ERROR(spec.check_options({"path"}));
  BRIGADE_ASSIGN_OR_RETURN(const std::string path, spec.get_string("path", ""));
  std::FILE* file = nullptr;
  if (!path.empty()) {
    file = std::fopen(path.c_str(), "a");
    if (!file) return not_found("cannot open '" + path + "' for appending: " + std::strerror(errno));
  }
  return std::unique_ptr<Station>(std::make_unique<RequestLogStation>(file, path));
}

}  // namespace brigade
