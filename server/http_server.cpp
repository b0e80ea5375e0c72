#include "server/http_server.h"

#include <nlohmann/json.hpp>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

#include <array>
#include <chrono>
#include <ctime>
#include <future>
#include <deque>
#include <thread>

#include "core/sampling.h"
#include "server/embeddings_route.h"
#include "server/score_route.h"
#include "server/openai_format.h"
#include "server/responses_state.h"
#include "server/routes.h"
#include "server/stats_logger.h"

namespace brigade::server {

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr auto kIdleTimeout = std::chrono::seconds(120);

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// One connection. HTTP/1.1 keep-alive for plain responses; a stream (SSE) ends the connection,
// its body delimited by the close. All members are touched only on the connection's strand.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<ServerContext> ctx) : stream_(std::move(socket)), ctx_(std::move(ctx)) {}
  void run() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_request(); });
  }

 private:
  struct ChoiceTiming {
    Clock::time_point first, last;
    int n_tokens = 0;
  };

  void read_request() {
    parser_.emplace();
    parser_->body_limit(ctx_->options.max_body_bytes);
    stream_.expires_after(kIdleTimeout);
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->on_read(ec);
    });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout ||
        ec == net::error::operation_aborted || ec == net::error::connection_reset) {
      return close();
    }
    keep_alive_ = false;
    if (ec == http::error::body_limit) {
      return send(error_response(413, "the request body is larger than " + std::to_string(ctx_->options.max_body_bytes) +
                                          " bytes: send a shorter prompt", StatusCode::invalid_argument));
    }
    if (ec) return send(error_response(400, "malformed HTTP request: " + ec.message(), StatusCode::invalid_argument));
    const auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    arrival_ = Clock::now();
    auto sv = [](beast::string_view v) { return std::string_view(v.data(), v.size()); };
    HttpRequestView view{sv(req.method_string()), sv(req.target()), sv(req[http::field::authorization]), req.body(),
                         sv(req["X-Request-Id"])};
    // A bug that throws while reading a request (a JSON misuse, say) answers 500 and leaves the
    // server running, instead of taking every other connection down with it.
    Routed routed = SimpleResponse{};
    try {
      routed = route(*ctx_, view);
    } catch (const std::exception& e) {
      spdlog::error("server: {} {} failed: {}", view.method, view.target, e.what());
      return send(error_response(500, std::string("internal error while reading the request: ") + e.what(),
                                 StatusCode::internal));
    }
    if (auto* simple = std::get_if<SimpleResponse>(&routed)) return send(*simple);
    if (auto* embed = std::get_if<EmbeddingsRequest>(&routed)) return run_embeddings(ctx_, std::move(*embed), answer_later());
    if (auto* score = std::get_if<ScoreRequest>(&routed)) return run_score(ctx_, std::move(*score), answer_later());
    if (auto* cls = std::get_if<ClassifyRequest>(&routed)) return run_classify(ctx_, std::move(*cls), answer_later());
    start_generation(std::get<CompletionRequest>(std::move(routed)));
  }

  // Where a request the engine answers in one piece (embeddings, scores) sends its response: the
  // session's strand. The engine answers; a dead client shows up as a failed write.
  std::function<void(SimpleResponse)> answer_later() {
    stream_.expires_never();
    return [self = shared_from_this()](SimpleResponse r) {
      net::post(self->stream_.get_executor(), [self, r = std::move(r)] { self->send(r); });
    };
  }

  // Plain (non-stream) response; keeps the connection when the client asked to.
  void send(const SimpleResponse& r) {
    ctx_->metrics.count_response(r.status);
    auto res = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(r.status), 11);
    res->set(http::field::server, "brigade");
    res->set(http::field::content_type, r.content_type);
    if (r.retry_after_ms > 0) {  // what OpenAI's clients wait for before their retry of a 429
      res->set(http::field::retry_after, std::to_string((r.retry_after_ms + 999) / 1000));
      res->set("retry-after-ms", std::to_string(r.retry_after_ms));
    }
    res->keep_alive(keep_alive_);
    res->body() = r.body;
    res->prepare_payload();
    stream_.expires_after(kIdleTimeout);
    http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
      if (ec) return self->close();
      if (!self->keep_alive_) return self->linger_close();
      self->read_request();
    });
  }

  void start_generation(CompletionRequest request) {
    ++generation_;
    stream_mode_ = request.stream;
    headers_sent_ = false;
    ended_ = false;
    retry_after_ms_ = 0;
    const uint64_t n = ctx_->next_id.fetch_add(1);
    const auto now = static_cast<int64_t>(std::time(nullptr));
    // vLLM's: the client's request id (X-Request-Id, else the body's request_id) names the response.
    const std::string id = request.responses ? "resp_" + std::to_string(n)
                                             : (request.endpoint == Endpoint::chat ? "chatcmpl-" : "cmpl-") +
                                                   (request.request_id.empty() ? std::to_string(n) : request.request_id);
    const std::string& model = request.gen.lora.empty() ? ctx_->options.model_name : request.gen.lora;
    if (request.responses) state_ = std::make_unique<ResponsesState>(request, id, model, now);
    else state_ = std::make_unique<CompletionState>(request, id, model, now);
    if (ctx_->options.request_log) ctx_->options.request_log(describe_request(request, id, ctx_->options.max_log_len));
    const int n_choices = request.n_choices();
    timing_.assign(static_cast<size_t>(n_choices), {});
    engine_ids_.assign(static_cast<size_t>(n_choices), 0);
    stream_.expires_never();  // generation may take long; a dead client shows up as a failed write
    if (request.use_beam_search) return start_beam_searches(request);
    for (int i = 0; i < n_choices; ++i) {
      const GenerateOptions gen = request.choice_request(i);
      uint64_t key = 0;
      if (!ctx_->inflight.begin(key)) {
        finish_choice_locally(i, Status(StatusCode::cancelled, "the server is shutting down"));
        continue;
      }
      auto self = shared_from_this();
      auto ctx = ctx_;
      const uint64_t gen_no = generation_;
      auto submitted = ctx_->engine.submit(gen, [self, ctx, gen_no, i, key](const Event& ev) mutable {
        const auto at = Clock::now();
        net::post(self->stream_.get_executor(), [self, gen_no, i, ev, at] { self->on_event(gen_no, i, ev, at); });
        if (ev.finish == FinishReason::none) return;
        // This callback's hold on the session goes before the request leaves Inflight: once the
        // last one has, stop() may destroy the io_context, and a session destroyed after that
        // (the engine drops the callback later, on its own thread) would touch freed timers.
        self.reset();
        ctx->inflight.end(key);  // after the post: see Inflight
      });
      if (!submitted) {
        ctx_->inflight.end(key);
        finish_choice_locally(i, submitted.status());
        continue;
      }
      ctx_->inflight.set_id(key, *submitted);
      engine_ids_[static_cast<size_t>(i)] = *submitted;
    }
  }

  // use_beam_search: one beam search per prompt, whose beams (best first) are its n choices. They
  // come back together at the end and are fed to the choices as a stream's events would be.
  void start_beam_searches(const CompletionRequest& request) {
    const int n = request.n;
    for (int p = 0; p < request.n_prompts(); ++p) {
      uint64_t key = 0;
      if (!ctx_->inflight.begin(key)) {
        for (int k = 0; k < n; ++k) finish_choice_locally(p * n + k, Status(StatusCode::cancelled, "the server is shutting down"));
        continue;
      }
      auto self = shared_from_this();
      auto ctx = ctx_;
      const uint64_t gen_no = generation_;
      const bool with_ids = request.return_token_ids;
      auto submitted = ctx_->engine.submit_beam_search(
          request.beam_request(p), [self, ctx, gen_no, p, n, with_ids, key](Expected<BeamSearchResult> r) mutable {
            const auto at = Clock::now();
            net::post(self->stream_.get_executor(), [self, gen_no, p, n, with_ids, r = std::move(r), at] {
              self->on_beams(gen_no, p, n, with_ids, r, at);
            });
            self.reset();  // before Inflight::end, as in start_generation
            ctx->inflight.end(key);
          });
      if (!submitted) {
        ctx_->inflight.end(key);
        for (int k = 0; k < n; ++k) finish_choice_locally(p * n + k, submitted.status());
        continue;
      }
      ctx_->inflight.set_id(key, *submitted);
      for (int k = 0; k < n; ++k) engine_ids_[static_cast<size_t>(p * n + k)] = *submitted;
    }
  }

  void on_beams(uint64_t gen_no, int p, int n, bool with_ids, const Expected<BeamSearchResult>& r, Clock::time_point at) {
    for (int k = 0; k < n; ++k) {
      const int choice = p * n + k;
      if (r && static_cast<size_t>(k) < r->beams.size()) {
        for (const Event& ev : beam_events(*r, static_cast<size_t>(k), with_ids)) on_event(gen_no, choice, ev, at);
        continue;
      }
      Event ev;  // the search failed (or was cancelled: an abort, as a cancelled request's)
      const Status st = r ? internal_error("the beam search returned fewer beams than n") : r.status();
      ev.finish = st.code() == StatusCode::cancelled ? FinishReason::abort : FinishReason::error;
      ev.error = st.message();
      ev.error_code = st.code();
      on_event(gen_no, choice, ev, at);
    }
  }

  // A choice that never reached the engine ends as an error event of its own.
  void finish_choice_locally(int i, const Status& st) {
    Event ev;
    ev.finish = FinishReason::error;
    ev.error = st.message();
    ev.error_code = st.code();
    on_event(generation_, i, ev, Clock::now());
  }

  void on_event(uint64_t gen_no, int i, const Event& ev, Clock::time_point at) {
    if (gen_no != generation_ || !state_ || ended_) return;
    ChoiceTiming& t = timing_[static_cast<size_t>(i)];
    if (!ev.token_ids.empty()) {
      if (t.n_tokens == 0) t.first = at;
      if (t.n_tokens > 0) ctx_->metrics.observe_inter_token(seconds(at - t.last));
      t.last = at;
      t.n_tokens += static_cast<int>(ev.token_ids.size());
    }
    std::string out = state_->on_event(i, ev);
    if (ev.finish == FinishReason::error) retry_after_ms_ = std::max(retry_after_ms_, ev.retry_after_ms);
    if (ev.finish != FinishReason::none) {
      engine_ids_[static_cast<size_t>(i)] = 0;
      ChoiceEnd end;
      end.finish = ev.finish;
      end.prompt_tokens = ev.prompt_tokens;
      end.completion_tokens = ev.completion_tokens;
      end.timed = t.n_tokens > 0;
      if (end.timed) {
        end.ttft_s = seconds(t.first - arrival_);
        end.e2e_s = seconds(t.last - arrival_);
        end.has_tpot = t.n_tokens > 1;
        if (end.has_tpot) end.tpot_s = seconds(t.last - t.first) / (t.n_tokens - 1);
      }
      ctx_->metrics.observe_choice(end);
    }
    const Status& err = state_->error();
    if (!err.is_ok() && !headers_sent_) {
      // Nothing sent yet: the whole request fails with the error's status (400 for a prompt too
      // long, 429 for a full queue); the other choices are cancelled.
      cancel_all();
      if (!state_->done()) return;
      ended_ = true;
      SimpleResponse res = error_response(http_status_for(err.code()), err.message(), err.code());
      res.retry_after_ms = retry_after_ms_;
      return send(res);
    }
    if (!stream_mode_) {
      if (state_->done()) {
        ended_ = true;
        send(SimpleResponse{200, "application/json", state_->final_body()});
      }
      return;
    }
    if (!headers_sent_) start_stream();
    if (ev.finish == FinishReason::error) out = state_->stream_error(ev);
    if (!out.empty()) queue_write(std::move(out));
    if (state_->done()) {
      ended_ = true;
      close_after_writes_ = true;
      queue_write(state_->stream_tail());
    }
  }

  void start_stream() {
    headers_sent_ = true;
    ctx_->metrics.count_response(200);
    queue_write(
        "HTTP/1.1 200 OK\r\nServer: brigade\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        "Connection: close\r\n\r\n");
    watch_for_disconnect();
  }

  // A streaming client sends nothing more; a completed read means it closed (or reset) the
  // connection, so its requests are cancelled at once instead of at the next failed write.
  void watch_for_disconnect() {
    stream_.socket().async_read_some(net::buffer(watch_buf_), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (self->socket_closed_) return;
      if (ec) return self->on_disconnect();
      self->watch_for_disconnect();
    });
  }

  void queue_write(std::string data) {
    writes_.push_back(std::move(data));
    if (!writing_) write_next();
  }

  void write_next() {
    if (writes_.empty()) {
      writing_ = false;
      if (close_after_writes_) close();
      return;
    }
    writing_ = true;
    net::async_write(stream_.socket(), net::buffer(writes_.front()),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->on_disconnect();
                       self->writes_.pop_front();
                       self->write_next();
                     });
  }

  void on_disconnect() {
    if (socket_closed_) return;
    if (!ended_) {
      ctx_->metrics.count_disconnect();
      ended_ = true;
      cancel_all();
    }
    close();
  }

  void cancel_all() {
    for (auto& id : engine_ids_) {
      if (id != 0) ctx_->engine.cancel(id);
    }
  }

  // Closes after a response the client may still be sending a body for (413): half-close, then
  // discard what arrives until the client closes (bounded), so the close does not reset the
  // connection before the client has read the answer.
  void linger_close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::chrono::seconds(5));
    drain();
  }

  void drain() {
    stream_.async_read_some(net::buffer(watch_buf_), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->close();
      self->drain();
    });
  }

  void close() {
    if (socket_closed_) return;
    socket_closed_ = true;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  std::shared_ptr<ServerContext> ctx_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool keep_alive_ = false;
  Clock::time_point arrival_;
  // The completion in progress (one at a time per connection).
  uint64_t generation_ = 0;  // events of an earlier generation are dropped
  std::unique_ptr<ResponseWriter> state_;
  std::vector<ChoiceTiming> timing_;
  std::vector<uint64_t> engine_ids_;  // per choice; 0 once finished
  bool stream_mode_ = false, headers_sent_ = false, ended_ = false;
  int64_t retry_after_ms_ = 0;  // the longest wait an error event of this request named
  std::deque<std::string> writes_;
  bool writing_ = false, close_after_writes_ = false, socket_closed_ = false;
  std::array<char, 256> watch_buf_{};
};

class HttpServerImpl final : public HttpServer {
 public:
  HttpServerImpl(Engine& engine, const ServerOptions& options)
      : engine_(engine), ctx_(std::make_shared<ServerContext>(engine, options)), acceptor_(net::make_strand(ioc_)) {
    ctx_->created = static_cast<int64_t>(std::time(nullptr));
  }
  ~HttpServerImpl() override { stop(); }

  Status listen() {
    beast::error_code ec;
    auto address = net::ip::make_address(ctx_->options.host, ec);
    if (ec) return invalid_argument("--host '" + ctx_->options.host + "' is not an IP address (e.g. 127.0.0.1 or 0.0.0.0)");
    if (ctx_->options.port < 0 || ctx_->options.port > 65535) {
      return invalid_argument("--port " + std::to_string(ctx_->options.port) + " is outside [0, 65535]");
    }
    tcp::endpoint ep(address, static_cast<unsigned short>(ctx_->options.port));
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return io_error("cannot listen on " + ctx_->options.host + ":" + std::to_string(ctx_->options.port) + ": " +
                      ec.message() + " (is another server running? pick another --port)");
    }
    port_ = acceptor_.local_endpoint().port();
    accept();
    const int n = std::max(1, ctx_->options.n_threads);
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { ioc_.run(); });
    return Status::ok();
  }

  int port() const override { return port_; }

  // --reasoning-parser: `auto` looks for harmony's `<|channel|>` (gpt-oss), then for a `</think>`
  // token in the model's vocabulary (Qwen3, QwQ, DeepSeek-R1 and V3.1, GLM-4.5 have one), then
  // for Seed-OSS's `</seed:think>`.
  Status resolve_reasoning() {
    auto one_token = [this](const char* tag) {
      auto ids = engine_.tokenize(tag, /*add_bos=*/false);
      return ids.has_value() && ids->size() == 1 ? (*ids)[0] : -1;
    };
    ctx_->think_open_id = one_token("<think>");
    ctx_->think_close_id = one_token("</think>");
    for (const char* end : {"<|return|>", "<|call|>"}) {
      if (const int32_t id = one_token(end); id >= 0) ctx_->harmony_stop_ids.push_back(id);
    }
    const int32_t channel = one_token("<|channel|>"), message = one_token("<|message|>");
    if (channel >= 0 && message >= 0) {  // vLLM's gpt-oss reasoning end: `<|channel|>final`, then `<|message|>`
      auto header = engine_.tokenize("<|channel|>final", /*add_bos=*/false);
      if (header.has_value() && header->size() >= 2 && header->front() == channel) {
        ctx_->harmony_final_header = *header;
        ctx_->harmony_message_id = message;
      }
    }
    const ReasoningVocab vocab{.think_close = ctx_->think_close_id >= 0,
                               .harmony_channel = channel >= 0,
                               .seed_close = one_token("</seed:think>") >= 0,
                               .cohere_close = one_token("<|END_THINKING|>") >= 0,
                               .mistral_close = one_token("[/THINK]") >= 0,
                               .gemma_channel = one_token("<|channel>") >= 0 && one_token("<channel|>") >= 0};
    auto kind = parse_reasoning_kind(ctx_->options.reasoning_parser, vocab);
    if (!kind) return invalid_argument("--reasoning-parser: " + kind.status().message());
    ctx_->reasoning = *kind;
    if (*kind == ReasoningKind::seed_oss || *kind == ReasoningKind::cohere_command || *kind == ReasoningKind::mistral ||
        *kind == ReasoningKind::gemma4) {
      // Their own tags' ids (the constraint's delay, routes.cpp).
      ctx_->think_open_id = one_token(reasoning_open_tag(*kind).data());  // (literals: null-terminated)
      ctx_->think_close_id = one_token(reasoning_close_tag(*kind).data());
    }
    if (*kind == ReasoningKind::granite || *kind == ReasoningKind::hunyuan_a13b) {
      // Tags that are no single token (plain text, or `</think>` with text around it): a constraint
      // applies from the first token, and its output stays whole (routes.cpp).
      ctx_->think_open_id = ctx_->think_close_id = -1;
    }
    if (const std::string& start = ctx_->options.reasoning_start_str;
        !start.empty() && (*kind == ReasoningKind::none || start != reasoning_open_tag(*kind)))
      return invalid_argument("--reasoning-config: reasoning_start_str '" + start +
                              "' is not the opening tag of the reasoning parser (--reasoning-parser " +
                              ctx_->options.reasoning_parser + (*kind == ReasoningKind::none ? ", none" : ": " + std::string(reasoning_open_tag(*kind))) + ")");
    if (const std::string& end = ctx_->options.reasoning_end_str; !end.empty()) {
      if (*kind == ReasoningKind::none || *kind == ReasoningKind::openai_gptoss || ctx_->think_close_id < 0)
        return invalid_argument("--reasoning-config: reasoning_end_str needs a reasoning parser whose closing tag is "
                                "one token (--reasoning-parser " + ctx_->options.reasoning_parser + " has none)");
      auto ids = engine_.tokenize(end, /*add_bos=*/false);
      if (!ids) return invalid_argument("--reasoning-config: reasoning_end_str: " + ids.status().message());
      if (ids->empty() || ids->back() != ctx_->think_close_id || ids->size() > SamplingConfig::kMaxThinkingEnd)
        return invalid_argument("--reasoning-config: reasoning_end_str must end with the parser's closing tag " +
                                std::string(reasoning_close_tag(*kind)) + " and be at most " +
                                std::to_string(SamplingConfig::kMaxThinkingEnd) + " tokens (got " +
                                std::to_string(ids->size()) + " tokens)");
      ctx_->thinking_end_ids = std::move(*ids);
    }
    return Status::ok();
  }

  // --tool-call-parser: a vLLM parser name overrides the syntax the chat template teaches.
  Status resolve_tool_parser() {
    if (ctx_->options.tool_call_parser.empty()) return Status::ok();
    auto syntax = parse_tool_syntax(ctx_->options.tool_call_parser);
    if (!syntax) return invalid_argument("--tool-call-parser: " + syntax.status().message());
    ctx_->tool_syntax = *syntax;
    return Status::ok();
  }

  void stop() override {
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (stopped_) return;
    stopped_ = true;
    // The acceptor lives on its strand: close it there, and wait, so no connection is accepted
    // after stop() returns.
    std::promise<void> closed;
    net::post(acceptor_.get_executor(), [this, &closed] {
      beast::error_code ignored;
      acceptor_.close(ignored);
      closed.set_value();
    });
    if (!threads_.empty()) closed.get_future().wait();
    ctx_->inflight.stop_and_drain(engine_, std::chrono::seconds(30));
    ioc_.stop();
    for (auto& t : threads_) t.join();
  }

 private:
  void accept() {
    acceptor_.async_accept(net::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
      if (!ec) std::make_shared<Session>(std::move(socket), ctx_)->run();
      accept();
    });
  }

  Engine& engine_;
  net::io_context ioc_;
  std::shared_ptr<ServerContext> ctx_;
  tcp::acceptor acceptor_;
  int port_ = 0;
  std::vector<std::thread> threads_;
  std::mutex stop_mu_;
  bool stopped_ = false;
};

}  // namespace

Expected<std::unique_ptr<HttpServer>> HttpServer::start(Engine& engine, const ServerOptions& options) {
  if (!options.default_chat_template_kwargs.empty()) {
    const auto kwargs = nlohmann::json::parse(options.default_chat_template_kwargs, nullptr, /*allow_exceptions=*/false);
    if (kwargs.is_discarded() || !kwargs.is_object())
      return invalid_argument("--default-chat-template-kwargs must be a JSON object (e.g. '{\"enable_thinking\": false}')");
  }
  auto server = std::make_unique<HttpServerImpl>(engine, options);
  BRIGADE_RETURN_IF_ERROR(server->resolve_reasoning());
  BRIGADE_RETURN_IF_ERROR(server->resolve_tool_parser());
  BRIGADE_RETURN_IF_ERROR(server->listen());
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace brigade::server
