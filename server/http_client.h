// A small blocking HTTP/1.1 client (Boost.Beast) for `brigade bench` and the server tests: one
// connection per call, the body either whole or streamed piece by piece, and an SSE splitter.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace brigade::server {

struct ClientRequest {
  std::string method = "POST";
  std::string target = "/v1/completions";
  std::string body;      // sent as application/json when non-empty
  std::string api_key;   // "Authorization: Bearer <key>" when non-empty
  std::vector<std::pair<std::string, std::string>> headers;  // more header fields, as given
};

struct ClientResponse {
  int status = 0;
  std::string content_type;
  std::string body;
  std::string retry_after;  // the Retry-After header, when sent
};

// Sends one request and reads the whole response. io_error when the server cannot be reached or
// the exchange fails or times out.
Expected<ClientResponse> http_request(const std::string& host, int port, const ClientRequest& request,
                                      std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Sends one request and hands each piece of the response body to on_data as it arrives; when
// on_data returns false the connection is closed at once (a client that goes away). Returns the
// HTTP status (and content type); body is left empty.
Expected<ClientResponse> http_stream(const std::string& host, int port, const ClientRequest& request,
                                     const std::function<bool(std::string_view)>& on_data,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Splits a server-sent-event byte stream into the payloads of its `data:` lines, one per event,
// across arbitrary piece boundaries.
class SseSplitter {
 public:
  // Appends the payloads completed by `piece` to out.
  void feed(std::string_view piece, std::vector<std::string>& out);

 private:
  std::string pending_;
};

}  // namespace brigade::server
