#include "server/http_client.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <cstdint>
#include <limits>

namespace brigade::server {

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

Status fail(const std::string& what, const beast::error_code& ec) {
  return io_error(what + ": " + ec.message() + " (is `brigade serve` running on that host and port?)");
}

// Connects and writes the request; the stream is left open for the response.
Status send(beast::tcp_stream& stream, const std::string& host, int port, const ClientRequest& r,
            std::chrono::milliseconds timeout) {
  beast::error_code ec;
  auto address = net::ip::make_address(host, ec);
  if (ec) return invalid_argument("host '" + host + "' is not an IP address");
  stream.expires_after(timeout);
  stream.connect(tcp::endpoint(address, static_cast<unsigned short>(port)), ec);
  if (ec) return fail("connect to " + host + ":" + std::to_string(port), ec);
  http::request<http::string_body> req(r.method == "GET" ? http::verb::get : http::verb::post, r.target, 11);
  req.set(http::field::host, host);
  req.set(http::field::user_agent, "brigade-bench");
  if (!r.api_key.empty()) req.set(http::field::authorization, "Bearer " + r.api_key);
  for (const auto& [name, value] : r.headers) req.set(name, value);
  if (!r.body.empty()) req.set(http::field::content_type, "application/json");
  req.body() = r.body;
  req.prepare_payload();
  req.keep_alive(false);
  stream.expires_after(timeout);
  http::write(stream, req, ec);
  // A server may answer before reading the whole body (413) and stop reading: the answer is
  // still there to read, so only a failure to connect is final here.
  (void)ec;
  return Status::ok();
}

}  // namespace

Expected<ClientResponse> http_request(const std::string& host, int port, const ClientRequest& request,
                                      std::chrono::milliseconds timeout) {
  std::string body;
  auto res = http_stream(host, port, request, [&](std::string_view piece) {
    body.append(piece);
    return true;
  }, timeout);
  if (res) res->body = std::move(body);
  return res;
}

Expected<ClientResponse> http_stream(const std::string& host, int port, const ClientRequest& request,
                                     const std::function<bool(std::string_view)>& on_data,
                                     std::chrono::milliseconds timeout) {
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  BRIGADE_RETURN_IF_ERROR(send(stream, host, port, request, timeout));
  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());  // streams are unbounded
  beast::error_code ec;
  stream.expires_after(timeout);
  http::read_header(stream, buffer, parser, ec);
  if (ec) return fail("read the response header of " + request.target, ec);
  ClientResponse out;
  out.status = parser.get().result_int();
  const auto content_type = parser.get()[http::field::content_type];
  out.content_type.assign(content_type.data(), content_type.size());
  const auto retry_after = parser.get()[http::field::retry_after];
  out.retry_after.assign(retry_after.data(), retry_after.size());
  char chunk[8192];
  while (!parser.is_done()) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof chunk;
    stream.expires_after(timeout);
    http::read_some(stream, buffer, parser, ec);  // returns with what has arrived (SSE pieces)
    if (ec == http::error::need_buffer) ec = {};
    const size_t n = sizeof chunk - parser.get().body().size;
    if (n > 0 && !on_data(std::string_view(chunk, n))) {
      stream.socket().shutdown(tcp::socket::shutdown_both, ec);
      stream.socket().close(ec);
      return out;
    }
    if (ec == http::error::end_of_stream || ec == net::error::eof) break;
    if (ec) return fail("read the response body of " + request.target, ec);
  }
  return out;
}

void SseSplitter::feed(std::string_view piece, std::vector<std::string>& out) {
  pending_.append(piece);
  size_t start = 0;
  for (;;) {
    const size_t end = pending_.find("\n\n", start);
    if (end == std::string::npos) break;
    std::string_view event(pending_.data() + start, end - start);
    // An event may hold several lines; only `data:` lines carry a payload (one per event here).
    size_t line_start = 0;
    while (line_start <= event.size()) {
      size_t line_end = event.find('\n', line_start);
      if (line_end == std::string_view::npos) line_end = event.size();
      std::string_view line = event.substr(line_start, line_end - line_start);
      if (line.starts_with("data:")) {
        line.remove_prefix(5);
        if (line.starts_with(' ')) line.remove_prefix(1);
        out.emplace_back(line);
      }
      line_start = line_end + 1;
    }
    start = end + 2;
  }
  pending_.erase(0, start);
}

}  // namespace brigade::server
