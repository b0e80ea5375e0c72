// The HTTP server in-process on an ephemeral port over a tiny synthetic model, driven by the
// Beast client: endpoints, SSE framing, errors, API keys, concurrency, disconnects, overload.
#include "server/http_server.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <thread>

#include <unistd.h>

#include "models/make_model.h"
#include "server/http_client.h"
#include "server/metrics.h"
#include "tests/engine_test_util.h"

namespace brigade::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kHost = "127.0.0.1";

// One tiny model for the whole suite (written once into a temp dir).
std::string tiny_model_dir() {
  static const std::string dir = [] {
    fs::path d = fs::temp_directory_path() / ("brigade_server_test_" + std::to_string(::getpid()));
    Status st = write_synthetic_model(testing::tiny_llama(512, 2048, 11), d.string());
    EXPECT_TRUE(st.is_ok()) << st.to_string();
    return d.string();
  }();
  return dir;
}

std::unique_ptr<Engine> make_engine(int max_running = 64, int max_waiting = 1024,
                                    std::vector<StationConfig> stations = {}) {
  EngineOptions o = testing::test_engine_options(tiny_model_dir(), 1);
  o.topology.stations = std::move(stations);
  auto& inst = o.topology.instances.front();
  inst.kv.memory_mb = 64;
  inst.scheduler.max_running = max_running;
  inst.scheduler.max_waiting = max_waiting;
  auto e = Engine::create(o);
  EXPECT_TRUE(e.has_value()) << e.status().to_string();
  return e ? std::move(*e) : nullptr;
}

struct Served {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<HttpServer> server;
  int port = 0;
};

Served serve(ServerOptions options = {}, int max_running = 64, int max_waiting = 1024,
             std::vector<StationConfig> stations = {}) {
  Served s;
  s.engine = make_engine(max_running, max_waiting, std::move(stations));
  options.port = 0;
  options.model_name = "tiny";
  auto srv = HttpServer::start(*s.engine, options);
  EXPECT_TRUE(srv.has_value()) << srv.status().to_string();
  if (srv) {
    s.server = std::move(*srv);
    s.port = s.server->port();
  }
  return s;
}

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { served_ = new Served(serve()); }
  static void TearDownTestSuite() {
    served_->server.reset();  // before the engine it serves
    delete served_;
  }
  int port() const { return served_->port; }

  ClientResponse post(const std::string& target, const std::string& body, const std::string& key = "") const {
    auto r = http_request(kHost, port(), {"POST", target, body, key});
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    return r ? *r : ClientResponse{};
  }
  ClientResponse get(const std::string& target) const {
    auto r = http_request(kHost, port(), {"GET", target, "", ""});
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    return r ? *r : ClientResponse{};
  }
  // The SSE payloads of one streamed request.
  std::vector<std::string> stream(const json& body, int* status = nullptr) const {
    SseSplitter split;
    std::vector<std::string> events;
    auto r = http_stream(kHost, port(), {"POST", "/v1/completions", body.dump(), ""}, [&](std::string_view piece) {
      split.feed(piece, events);
      return true;
    });
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    if (status) *status = r ? r->status : 0;
    if (r && r->status == 200) {
      EXPECT_EQ(r->content_type, "text/event-stream");
    }
    return events;
  }
  double metric(const std::string& name) const {
    const std::string text = get("/metrics").body;
    const size_t at = text.find("\n" + name + " ");
    if (at == std::string::npos) {
      ADD_FAILURE() << "metric " << name << " missing";
      return -1;
    }
    return std::stod(text.substr(at + name.size() + 2));
  }

  static Served* served_;
};
Served* ServerTest::served_ = nullptr;

json greedy(const std::string& prompt, int max_tokens) {
  return {{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true}};
}

std::string streamed_text(const std::vector<std::string>& events) {
  std::string text;
  for (const auto& e : events) {
    if (e == "[DONE]") continue;
    json j = json::parse(e);
    for (const auto& c : j["choices"]) text += c["text"].get<std::string>();
  }
  return text;
}

TEST_F(ServerTest, HealthModelsMetrics) {
  auto h = get("/health");
  EXPECT_EQ(h.status, 200);
  auto m = get("/v1/models");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(json::parse(m.body)["data"][0]["id"], "tiny");
  auto x = get("/metrics");
  ASSERT_EQ(x.status, 200);
  for (const char* name : {"brigade_requests_running", "brigade_requests_waiting", "brigade_kv_pages_used",
                           "brigade_kv_pages_total", "brigade_generation_tokens_total", "brigade_preemptions_total",
                           "brigade_time_to_first_token_seconds_bucket", "brigade_time_per_output_token_seconds_count",
                           "brigade_inter_token_latency_seconds_count",
                           "brigade_spec_draft_tokens_total", "brigade_spec_accepted_tokens_total",
                           "brigade_spec_off_steps_total{reason=\"compute_bound\"}"}) {
    EXPECT_NE(x.body.find(name), std::string::npos) << name;
  }
  EXPECT_GT(metric("brigade_kv_pages_total"), 0);
  EXPECT_EQ(get("/nope").status, 404);
  EXPECT_EQ(post("/health", "{}").status, 405);
  // vLLM's /version and SageMaker's /ping (GET and POST).
  auto v = get("/version");
  ASSERT_EQ(v.status, 200);
  EXPECT_FALSE(json::parse(v.body)["version"].get<std::string>().empty()) << v.body;
  EXPECT_EQ(get("/ping").status, 200);
  EXPECT_EQ(post("/ping", "").status, 200);
}

// Serves `engine`, sends n greedy 3-token completions, and reads /metrics into text.
void metrics_after_completions(Engine& engine, int n, std::string& text) {
  ServerOptions so;
  so.port = 0;
  so.model_name = "tiny";
  auto srv = HttpServer::start(engine, so);
  ASSERT_TRUE(srv.has_value()) << srv.status().to_string();
  for (int i = 0; i < n; ++i) {
    auto r = http_request(kHost, (*srv)->port(), {"POST", "/v1/completions", greedy("Once upon a time", 3).dump(), ""});
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    ASSERT_EQ(r->status, 200) << r->body;
  }
  auto m = http_request(kHost, (*srv)->port(), {"GET", "/metrics", "", ""});
  ASSERT_TRUE(m.has_value());
  text = m->body;
}

// The roofline lines of /metrics (DESIGN.md §9): the work counters always, the ceilings and the
// per-bound counters only when the ceilings were measured.
TEST(ServerMetrics, RooflineLinesFollowTheEngineStats) {
  server::ServerMetrics m;
  EngineStats s;
  s.step_flops = 1200;
  s.step_bytes = 3400;
  std::string text = m.render(s);
  EXPECT_NE(text.find("\nbrigade_step_flops_total 1200\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nbrigade_step_bytes_total 3400\n"), std::string::npos);
  EXPECT_EQ(text.find("brigade_device_peak_bytes_per_second"), std::string::npos) << "no ceilings, no roofline lines";
  s.peak_bytes_per_s = 2e10;
  s.peak_flops_per_s = 1.5e11;
  s.memory_bound_steps = 7;
  s.compute_bound_steps = 2;
  s.memory_bound_executor_us = 3'000'000;
  s.memory_bound_roofline_us = 1'500'000;
  text = m.render(s);
  EXPECT_NE(text.find("\nbrigade_device_peak_bytes_per_second 2e+10\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nbrigade_device_peak_flops_per_second 1.5e+11\n"), std::string::npos);
  EXPECT_NE(text.find("\nbrigade_roofline_steps_total{bound=\"memory\"} 7\n"), std::string::npos);
  EXPECT_NE(text.find("\nbrigade_roofline_steps_total{bound=\"compute\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("\nbrigade_roofline_step_seconds_total{bound=\"memory\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("\nbrigade_roofline_allowed_seconds_total{bound=\"memory\"} 1.5\n"), std::string::npos);
}

// vLLM's families: the engine's gauges and counters under vLLM's names, labelled with the served
// model (escaped) and engine 0; KV usage counts cached pages no request uses as free, as vLLM
// counts its blocks; finish reasons and the token histograms from the observed choices.
TEST(ServerMetrics, VllmNamedFamiliesRepeatTheStatsWithVllmsLabels) {
  server::ServerMetrics m("my \"model\"");
  server::ChoiceEnd a;
  a.finish = FinishReason::length;
  a.prompt_tokens = 7;
  a.completion_tokens = 16;
  a.timed = true;
  a.ttft_s = 0.02;
  a.e2e_s = 0.3;
  a.has_tpot = true;
  a.tpot_s = 0.01;
  m.observe_choice(a);
  server::ChoiceEnd b;
  b.finish = FinishReason::stop;
  b.prompt_tokens = 300;
  b.completion_tokens = 1;
  m.observe_choice(b);
  server::ChoiceEnd failed;
  failed.finish = FinishReason::error;
  m.observe_choice(failed);
  for (double gap : {0.004, 0.012, 0.3}) m.observe_inter_token(gap);
  EngineStats s;
  s.n_running = 2;
  s.n_waiting = 3;
  s.kv_pages_total = 100;
  s.kv_pages_used = 60;
  s.cache_pages = 50;
  s.cache_idle_pages = 40;
  s.prompt_tokens = 307;
  s.generated_tokens = 17;
  s.preemptions = 1;
  s.cache_lookup_tokens = 400;
  s.cache_hit_tokens = 64;
  s.cache_loaded_tokens = 16;
  const std::string text = m.render(s);
  const std::string l = "{model_name=\"my \\\"model\\\"\",engine=\"0\"";
  for (const std::string& line :
       {"vllm:num_requests_running" + l + "} 2", "vllm:num_requests_waiting" + l + "} 3",
        "vllm:kv_cache_usage_perc" + l + "} 0.2", "vllm:gpu_cache_usage_perc" + l + "} 0.2",
        "vllm:num_preemptions_total" + l + "} 1", "vllm:prompt_tokens_total" + l + "} 307",
        "vllm:generation_tokens_total" + l + "} 17", "vllm:prefix_cache_queries_total" + l + "} 400",
        "vllm:prefix_cache_hits_total" + l + "} 80", "vllm:request_success_total" + l + ",finished_reason=\"stop\"} 1",
        "vllm:request_success_total" + l + ",finished_reason=\"length\"} 1",
        "vllm:request_success_total" + l + ",finished_reason=\"abort\"} 0",
        "vllm:request_success_total" + l + ",finished_reason=\"error\"} 1",
        "vllm:time_to_first_token_seconds_count" + l + "} 1", "vllm:e2e_request_latency_seconds_sum" + l + "} 0.3",
        "vllm:request_time_per_output_token_seconds_count" + l + "} 1",
        "vllm:inter_token_latency_seconds_bucket" + l + ",le=\"0.005\"} 1",
        "vllm:inter_token_latency_seconds_bucket" + l + ",le=\"0.025\"} 2",
        "vllm:inter_token_latency_seconds_bucket" + l + ",le=\"0.3\"} 3",
        "vllm:inter_token_latency_seconds_count" + l + "} 3",
        "vllm:request_prompt_tokens_bucket" + l + ",le=\"5\"} 0", "vllm:request_prompt_tokens_bucket" + l + ",le=\"10\"} 1",
        "vllm:request_prompt_tokens_bucket" + l + ",le=\"500\"} 2", "vllm:request_prompt_tokens_count" + l + "} 2",
        "vllm:request_generation_tokens_bucket" + l + ",le=\"1\"} 1",
        "vllm:request_generation_tokens_bucket" + l + ",le=\"+Inf\"} 2"}) {
    EXPECT_NE(text.find("\n" + line + "\n"), std::string::npos) << line << "\n" << text;
  }
  EXPECT_NE(text.find("# TYPE vllm:request_success_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("\nbrigade_time_to_first_token_seconds_count 1\n"), std::string::npos)
      << "brigade's own families are unchanged";
  EXPECT_NE(text.find("\nbrigade_inter_token_latency_seconds_count 3\n"), std::string::npos);
}

// /metrics of an engine with two instances behind a round-robin router: the unlabelled totals
// as before, and per-instance and router lines labelled with the instance names.
TEST(ServerMetrics, TwoInstancesGetLabelledLinesBesideTheTotals) {
  EngineOptions o = testing::test_engine_options(tiny_model_dir(), 1);
  o.topology.instances.front().kv.memory_mb = 16;
  o.topology.instances.push_back(o.topology.instances.front());
  o.topology.instances[0].name = "left";
  o.topology.instances[1].name = "right";
  o.topology.router.policy = "round_robin";
  auto engine = Engine::create(o);
  ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
  std::string text;
  ASSERT_NO_FATAL_FAILURE(metrics_after_completions(**engine, 4, text));
  const int pages = (*engine)->instance_stats()[0].stats.kv_pages_total;
  for (const std::string& line : std::vector<std::string>{
           "\nbrigade_requests_finished_total 4\n", "\nbrigade_generation_tokens_total 12\n",
        "\nbrigade_kv_pages_total " + std::to_string(2 * pages) + "\n",
        "\nbrigade_instance_kv_pages_total{instance=\"left\"} " + std::to_string(pages) + "\n",
        "\nbrigade_instance_requests_finished_total{instance=\"left\"} 2\n",
        "\nbrigade_instance_requests_finished_total{instance=\"right\"} 2\n",
        "\nbrigade_instance_requests_running{instance=\"right\"} 0\n",
        "\nbrigade_instance_up{instance=\"left\"} 1\n",
        "\nbrigade_router_requests_total{instance=\"left\",reason=\"round_robin\"} 2\n",
        "\nbrigade_router_requests_total{instance=\"right\",reason=\"cache\"} 0\n",
        "\n# TYPE brigade_router_requests_total counter\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\nin\n" << text;
  }
  // 3 tokens a completion: one to two gaps between deliveries each (a step may bring several).
  const auto at = text.find("\nbrigade_inter_token_latency_seconds_count ");
  ASSERT_NE(at, std::string::npos);
  const int gaps = std::stoi(text.substr(at + std::strlen("\nbrigade_inter_token_latency_seconds_count ")));
  EXPECT_GE(gaps, 4);
  EXPECT_LE(gaps, 8);
}

// PD separation: each instance's role and the hand-offs between them.
TEST(ServerMetrics, PdInstancesReportTheirRoleAndTransfers) {
  EngineOptions o = testing::test_engine_options(tiny_model_dir(), 1);
  o.topology.instances.front().kv.memory_mb = 16;
  o.topology.instances.push_back(o.topology.instances.front());
  o.topology.instances[0].name = "pre";
  o.topology.instances[0].role = "prefill";
  o.topology.instances[1].name = "dec";
  o.topology.instances[1].role = "decode";
  auto engine = Engine::create(o);
  ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
  std::string text;
  ASSERT_NO_FATAL_FAILURE(metrics_after_completions(**engine, 3, text));
  for (const std::string& line : std::vector<std::string>{
           "\nbrigade_instance_role{instance=\"pre\",role=\"prefill\"} 1\n",
           "\nbrigade_instance_role{instance=\"dec\",role=\"decode\"} 1\n",
           "\nbrigade_pd_transfers_out_total{instance=\"pre\"} 3\n",
           "\nbrigade_pd_transfers_in_total{instance=\"dec\"} 3\n",
           "\nbrigade_requests_finished_total 3\n",
           "\n# TYPE brigade_pd_transfer_seconds_total counter\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\nin\n" << text;
  }
}

TEST_F(ServerTest, TokenizeAndDetokenizeRoundTrip) {
  // vLLM's routes: the ids of a text, and the text of ids, from the served model's tokenizer.
  auto t = post("/tokenize", json{{"prompt", "Once upon a time"}}.dump());
  ASSERT_EQ(t.status, 200) << t.body;
  const json tok = json::parse(t.body);
  ASSERT_TRUE(tok["tokens"].is_array());
  EXPECT_EQ(tok["count"].get<size_t>(), tok["tokens"].size());
  EXPECT_GT(tok["count"].get<int>(), 1);
  EXPECT_GT(tok["max_model_len"].get<int>(), 0);
  auto plain = post("/tokenize", json{{"prompt", "Once upon a time"}, {"add_special_tokens", false}}.dump());
  ASSERT_EQ(plain.status, 200) << plain.body;
  const json no_bos = json::parse(plain.body);
  EXPECT_EQ(no_bos["count"].get<int>() + 1, tok["count"].get<int>()) << "the BOS is the only special token";
  auto d = post("/detokenize", json{{"tokens", no_bos["tokens"]}}.dump());
  ASSERT_EQ(d.status, 200) << d.body;
  EXPECT_EQ(json::parse(d.body)["prompt"], "Once upon a time");
  // Bad input: 400 with an OpenAI-style error body; the wrong method 405.
  for (const auto& [path, body] : std::vector<std::pair<std::string, std::string>>{
           {"/tokenize", "{"}, {"/tokenize", "{\"prompt\": 3}"}, {"/tokenize", "{\"prompt\": \"a\", \"add_special_tokens\": 1}"},
           {"/detokenize", "{\"tokens\": \"1 2\"}"}, {"/detokenize", "{\"tokens\": [1, -2]}"},
           {"/detokenize", "{\"tokens\": [1, 99999999]}"}, {"/tokenize", "[]"}}) {
    auto r = post(path, body);
    EXPECT_EQ(r.status, 400) << path << " " << body << ": " << r.body;
    EXPECT_TRUE(json::parse(r.body, nullptr, false).contains("error")) << r.body;
  }
  EXPECT_EQ(get("/tokenize").status, 405);
  EXPECT_EQ(get("/health").status, 200) << "the server keeps serving";
}

// usage.prompt_tokens_details.cached_tokens (OpenAI's field): a repeated long prompt reports
// what the prefix cache served: every prompt token but the last, which is computed for its
// logits (whole pages, then the rows of the last page: cache.partial_pages).
TEST_F(ServerTest, UsageCountsCachedPromptTokens) {
  std::string prompt;
  for (int i = 0; i < 12; ++i) prompt += "The kitchen brigade cooks " + std::to_string(i) + ". ";
  const double partial_before = metric("brigade_prefix_cache_partial_hit_tokens_total");
  auto first = post("/v1/completions", greedy(prompt, 2).dump());
  ASSERT_EQ(first.status, 200) << first.body;
  const json a = json::parse(first.body)["usage"];
  auto second = post("/v1/completions", greedy(prompt, 2).dump());
  const json b = json::parse(second.body)["usage"];
  EXPECT_EQ(a["prompt_tokens_details"]["cached_tokens"], 0);
  const int cached = b["prompt_tokens_details"]["cached_tokens"];
  EXPECT_EQ(cached, b["prompt_tokens"].get<int>() - 1);
  // Of those, the rows past the last whole 16-token page were copied from a partly used page
  // (the metric is the server's, shared by the suite's requests run one at a time).
  EXPECT_EQ(metric("brigade_prefix_cache_partial_hit_tokens_total") - partial_before, cached % 16);
}

// vLLM's add_special_tokens on completions: true (the default) puts the tokenizer's BOS first.
TEST_F(ServerTest, AddSpecialTokensFalseLeavesTheBosOut) {
  auto count = [&](const json& extra) {
    json req = greedy("Once upon a time", 1);
    for (const auto& [k, v] : extra.items()) req[k] = v;
    auto r = post("/v1/completions", req.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? json::parse(r.body)["usage"]["prompt_tokens"].get<int>() : -1;
  };
  auto ids = post("/tokenize", json{{"prompt", "Once upon a time"}, {"add_special_tokens", false}}.dump());
  const int bare = json::parse(ids.body)["count"];
  EXPECT_EQ(count(json::object()), bare + 1);
  EXPECT_EQ(count({{"add_special_tokens", true}}), bare + 1);
  EXPECT_EQ(count({{"add_special_tokens", false}}), bare);
  EXPECT_EQ(post("/v1/completions", json{{"prompt", "x"}, {"add_special_tokens", 1}}.dump()).status, 400);
}

// vLLM's request ids: the X-Request-Id header, else the body's request_id, names the response.
TEST_F(ServerTest, TheClientsRequestIdNamesTheResponse) {
  auto send = [&](json body, std::vector<std::pair<std::string, std::string>> headers, const char* target = "/v1/completions") {
    ClientRequest req{"POST", target, body.dump(), ""};
    req.headers = std::move(headers);
    auto r = http_request(kHost, port(), req);
    EXPECT_TRUE(r.has_value());
    return r ? *r : ClientResponse{};
  };
  json body = greedy("Once", 1);
  body["request_id"] = "from-body";
  auto r = send(body, {});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["id"], "cmpl-from-body");
  r = send(body, {{"X-Request-Id", "from-header"}});
  EXPECT_EQ(json::parse(r.body)["id"], "cmpl-from-header");
  r = send({{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 1}}, {{"X-Request-Id", "c1"}},
           "/v1/chat/completions");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["id"], "chatcmpl-c1");
  EXPECT_EQ(send(greedy("Once", 1), {{"X-Request-Id", std::string(300, 'a')}}).status, 400);
  body["request_id"] = 7;
  EXPECT_EQ(send(body, {}).status, 400);
  // Without one the server numbers its responses.
  EXPECT_EQ(json::parse(send(greedy("Once", 1), {}).body)["id"].get<std::string>().rfind("cmpl-", 0), 0u);
}

TEST_F(ServerTest, CompletionNonStreamingAndStreamingAgree) {
  auto r = post("/v1/completions", greedy("Once upon a time", 12).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json body = json::parse(r.body);
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["model"], "tiny");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["completion_tokens"], 12);
  EXPECT_GT(body["usage"]["prompt_tokens"].get<int>(), 0);
  const std::string text = body["choices"][0]["text"].get<std::string>();

  json sreq = greedy("Once upon a time", 12);
  sreq["stream"] = true;
  sreq["stream_options"] = {{"include_usage", true}};
  auto events = stream(sreq);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(json::parse(events[events.size() - 2])["usage"]["completion_tokens"], 12);
  EXPECT_EQ(streamed_text(events), text);
  // vLLM's continuous_usage_stats: every chunk carries the tokens so far.
  sreq["stream_options"]["continuous_usage_stats"] = true;
  events = stream(sreq);
  ASSERT_GE(events.size(), 3u);
  int last = 0;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    const json chunk = json::parse(events[i]);
    ASSERT_TRUE(chunk.contains("usage")) << events[i];
    const int done = chunk["usage"]["completion_tokens"];
    EXPECT_GE(done, last);
    last = done;
    EXPECT_EQ(chunk["usage"]["total_tokens"], chunk["usage"]["prompt_tokens"].get<int>() + done);
  }
  EXPECT_EQ(last, 12);
  EXPECT_EQ(streamed_text(events), text);
  // The TTFT histogram saw these requests.
  EXPECT_GE(metric("brigade_time_to_first_token_seconds_count"), 2);
}

TEST_F(ServerTest, NChoicesUseSeedPlusIndex) {
  json req = {{"prompt", "The actor model"}, {"max_tokens", 8}, {"temperature", 1.0}, {"n", 3}, {"seed", 5},
              {"ignore_eos", true}};
  auto r = post("/v1/completions", req.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json body = json::parse(r.body);
  ASSERT_EQ(body["choices"].size(), 3u);
  EXPECT_EQ(body["usage"]["completion_tokens"], 24);
  for (int i = 0; i < 3; ++i) {
    json one = req;
    one["n"] = 1;
    one["seed"] = 5 + i;
    auto s = post("/v1/completions", one.dump());
    ASSERT_EQ(s.status, 200);
    EXPECT_EQ(json::parse(s.body)["choices"][0]["text"], body["choices"][i]["text"]) << "choice " << i;
  }
}

// OpenAI's batch form (lm-evaluation-harness sends one): choice p * n + j answers prompt p with
// seed + j, exactly as a request of its own would; usage counts each prompt once; echo and
// streaming carry each choice's own prompt and index.
TEST_F(ServerTest, SeveralPromptsAnswerAsSeparateRequests) {
  const std::vector<std::string> prompts = {"The actor model", "Once upon", "A kitchen brigade has"};
  json req = {{"prompt", prompts}, {"max_tokens", 5}, {"temperature", 1.0}, {"n", 2}, {"seed", 9},
              {"ignore_eos", true}, {"echo", true}};
  auto r = post("/v1/completions", req.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = json::parse(r.body);
  ASSERT_EQ(body["choices"].size(), 6u);
  int prompt_tokens = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    json one = req;
    one["prompt"] = prompts[p];
    auto alone = post("/v1/completions", one.dump());
    ASSERT_EQ(alone.status, 200) << alone.body;
    const json a = json::parse(alone.body);
    prompt_tokens += a["usage"]["prompt_tokens"].get<int>();
    for (size_t j = 0; j < 2; ++j) {
      const json& c = body["choices"][p * 2 + j];
      EXPECT_EQ(c["index"], p * 2 + j);
      EXPECT_EQ(c["text"], a["choices"][j]["text"]) << "prompt " << p << ", choice " << j;
      EXPECT_EQ(c["text"].get<std::string>().rfind(prompts[p], 0), 0u) << "echo puts the choice's own prompt first";
    }
  }
  EXPECT_EQ(body["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(body["usage"]["completion_tokens"], 30);

  json sreq = req;
  sreq["stream"] = true;
  std::map<int, std::string> texts;
  int status = 0;
  const auto events = stream(sreq, &status);
  ASSERT_EQ(status, 200) << (events.empty() ? "" : events.front());
  for (const auto& e : events) {
    if (e == "[DONE]") continue;
    const json chunk = json::parse(e);
    for (const auto& c : chunk["choices"]) texts[c["index"].get<int>()] += c["text"].get<std::string>();
  }
  ASSERT_EQ(texts.size(), 6u) << events.size() << " events, first: " << (events.empty() ? "" : events.front());
  for (int c = 0; c < 6; ++c) EXPECT_EQ(texts[c], body["choices"][c]["text"]) << "streamed choice " << c;
}

TEST_F(ServerTest, BadInputIs400AndServerKeepsServing) {
  std::vector<std::string> bad = {
      "{not json",
      R"({"prompt": 12})",
      R"({"prompt": "x", "max_tokens": "many"})",
      R"({"prompt": "x", "max_tokens": 0})",
      R"({"prompt": "x", "temperature": -1})",
      R"({"prompt": "x", "top_p": 0})",
      R"({"prompt": "x", "top_p": 1.5})",
      R"({"prompt": "x", "n": 1000000})",
      R"({"prompt": "x", "stream": true, "n": 0})",
  };
  json too_long = {{"prompt", std::vector<int>(3000, 7)}, {"max_tokens", 4}};  // context is 2048
  bad.push_back(too_long.dump());
  json too_long_stream = too_long;
  too_long_stream["stream"] = true;
  bad.push_back(too_long_stream.dump());
  for (const auto& b : bad) {
    auto r = post("/v1/completions", b);
    EXPECT_EQ(r.status, 400) << b << " -> " << r.body;
    auto j = json::parse(r.body, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.body;
    EXPECT_TRUE(j["error"]["message"].is_string()) << r.body;
    EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  }
  // Over the 4 MiB body limit.
  auto big = post("/v1/completions", R"({"prompt": ")" + std::string(5u << 20, 'a') + "\"}");
  EXPECT_EQ(big.status, 413);
  EXPECT_TRUE(json::parse(big.body)["error"]["message"].is_string());
  // Chat through the model's template (the synthetic model carries Llama 2's).
  auto ok_chat = post("/v1/chat/completions",
                      R"({"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
                          "max_tokens": 4, "temperature": 0})");
  ASSERT_EQ(ok_chat.status, 200) << ok_chat.body;
  auto cj = json::parse(ok_chat.body);
  EXPECT_TRUE(cj["choices"][0]["message"]["content"].is_string()) << ok_chat.body;
  EXPECT_GT(cj["usage"]["prompt_tokens"].get<int>(), 10) << "the template's markers are part of the prompt";
  // A role the chat template does not know.
  auto chat = post("/v1/chat/completions", R"({"messages": [{"role": "wizard", "content": "hi"}]})");
  EXPECT_EQ(chat.status, 400) << chat.body;
  // Still serving.
  EXPECT_EQ(post("/v1/completions", greedy("still here", 2).dump()).status, 200);
}

TEST_F(ServerTest, SixtyFourConcurrentStreamsMatchSequential) {
  const std::vector<std::string> prompts = {"The kitchen brigade", "Once upon a time", "def fib(n):", "Dear diary,"};
  std::vector<std::string> expected;
  for (const auto& p : prompts) {
    auto r = post("/v1/completions", greedy(p, 16).dump());
    ASSERT_EQ(r.status, 200);
    expected.push_back(json::parse(r.body)["choices"][0]["text"].get<std::string>());
  }
  std::vector<std::future<std::string>> clients;
  for (int i = 0; i < 64; ++i) {
    clients.push_back(std::async(std::launch::async, [&, i] {
      json req = greedy(prompts[static_cast<size_t>(i) % prompts.size()], 16);
      req["stream"] = true;
      auto events = stream(req);
      EXPECT_EQ(events.empty() ? "" : events.back(), "[DONE]");
      return streamed_text(events);
    }));
  }
  for (int i = 0; i < 64; ++i) EXPECT_EQ(clients[static_cast<size_t>(i)].get(), expected[static_cast<size_t>(i) % 4]) << i;
}

TEST_F(ServerTest, DisconnectMidStreamFreesPages) {
  const double disconnects = metric("brigade_client_disconnects_total");
  json req = greedy("A long story", 1500);
  req["stream"] = true;
  int n_events = 0;
  double pages_during = 0;
  auto r = http_stream(kHost, port(), {"POST", "/v1/completions", req.dump(), ""}, [&](std::string_view) {
    if (++n_events < 3) return true;
    pages_during = metric("brigade_kv_pages_used");
    return false;  // the client goes away
  });
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_GT(pages_during, 0);
  // The server notices, cancels the request and the scheduler frees its pages (polled: no timing
  // is asserted, the loop only bounds the wait).
  // Pages of ended sequences may stay in the prefix cache; those are counted apart.
  double used = -1, running = -1;
  for (int i = 0; i < 500; ++i) {
    used = metric("brigade_kv_pages_used") - metric("brigade_prefix_cache_pages");
    running = metric("brigade_requests_running");
    if (used == 0 && running == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(used, 0);
  EXPECT_EQ(running, 0);
  EXPECT_EQ(metric("brigade_client_disconnects_total"), disconnects + 1);
}

TEST(ServerAuth, ApiKeyRequiredOnV1) {
  ServerOptions o;
  o.api_key = "sekret";
  Served s = serve(o);
  const std::string body = greedy("hi", 2).dump();
  auto no_key = http_request(kHost, s.port, {"POST", "/v1/completions", body, ""});
  ASSERT_TRUE(no_key.has_value());
  EXPECT_EQ(no_key->status, 401);
  EXPECT_TRUE(json::parse(no_key->body)["error"]["message"].is_string());
  EXPECT_EQ(http_request(kHost, s.port, {"POST", "/v1/completions", body, "wrong"})->status, 401);
  EXPECT_EQ(http_request(kHost, s.port, {"GET", "/v1/models", "", ""})->status, 401);
  EXPECT_EQ(http_request(kHost, s.port, {"POST", "/v1/completions", body, "sekret"})->status, 200);
  EXPECT_EQ(http_request(kHost, s.port, {"GET", "/health", "", ""})->status, 200);
  s.server.reset();
}

// vLLM's further --served-model-name names: /v1/models lists the base under each, and a request
// naming one runs the base model (the response names the first).
TEST(ServerModelNames, AliasesServeTheBaseModel) {
  ServerOptions o;
  o.model_aliases = {"tiny-alias", "another"};
  Served s = serve(o);
  auto models = http_request(kHost, s.port, {"GET", "/v1/models", "", ""});
  ASSERT_TRUE(models.has_value());
  std::vector<std::string> ids;
  ASSERT_EQ(models->status, 200) << models->body;
  const json listed = json::parse(models->body);
  for (const auto& m : listed["data"]) ids.push_back(m["id"].get<std::string>());
  EXPECT_EQ(ids, (std::vector<std::string>{"tiny", "tiny-alias", "another"}));
  json body = greedy("Once upon a time", 4);
  const auto base = http_request(kHost, s.port, {"POST", "/v1/completions", body.dump(), ""});
  body["model"] = "tiny-alias";
  const auto alias = http_request(kHost, s.port, {"POST", "/v1/completions", body.dump(), ""});
  ASSERT_TRUE(base.has_value() && alias.has_value());
  ASSERT_EQ(alias->status, 200) << alias->body;
  EXPECT_EQ(json::parse(alias->body)["model"], "tiny");
  EXPECT_EQ(json::parse(alias->body)["choices"][0]["text"], json::parse(base->body)["choices"][0]["text"]);
  s.server.reset();
}

// vLLM's --max-logprobs is the engine's (EngineOptions::max_logprobs): the server's parse takes
// the bound from it, so 30 lets a chat ask for 25 top logprobs and refuses 31 with a 400.
TEST(ServerMaxLogprobs, TheEnginesBoundIsTheServers) {
  EngineOptions eo = testing::test_engine_options(tiny_model_dir(), 1);
  eo.topology.instances.front().kv.memory_mb = 64;
  eo.max_logprobs = 30;
  Served s;
  auto e = Engine::create(eo);
  ASSERT_TRUE(e.has_value()) << e.status().to_string();
  s.engine = std::move(*e);
  ServerOptions o;
  o.port = 0;
  o.model_name = "tiny";
  auto srv = HttpServer::start(*s.engine, o);
  ASSERT_TRUE(srv.has_value()) << srv.status().to_string();
  s.server = std::move(*srv);
  json body = {{"model", "tiny"},       {"messages", {{{"role", "user"}, {"content", "hi"}}}},
               {"max_tokens", 2},       {"temperature", 0},
               {"logprobs", true},      {"top_logprobs", 25}};
  auto ok = http_request(kHost, s.server->port(), {"POST", "/v1/chat/completions", body.dump(), ""});
  ASSERT_TRUE(ok.has_value());
  ASSERT_EQ(ok->status, 200) << ok->body;
  const json answer = json::parse(ok->body);
  const json& content = answer["choices"][0]["logprobs"]["content"];
  ASSERT_FALSE(content.empty());
  EXPECT_EQ(content[0]["top_logprobs"].size(), 25u);
  body["top_logprobs"] = 31;
  auto refused = http_request(kHost, s.server->port(), {"POST", "/v1/chat/completions", body.dump(), ""});
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, 400) << refused->body;
  EXPECT_NE(refused->body.find("top_logprobs"), std::string::npos) << refused->body;
  s.server.reset();
}

// The model's generation_config as request defaults (vLLM's --generation-config auto): with
// temperature 0 there, requests that leave temperature out are greedy (the same text as an explicit
// temperature 0, run after run); a request's own temperature wins; max_new_tokens caps max_tokens.
TEST(ServerGenerationConfig, DefaultsFillWhatARequestLeavesOut) {
  ServerOptions o;
  o.generation_defaults.temperature = 0.0f;
  o.generation_defaults.max_tokens = 5;
  Served s = serve(o);
  auto text_of = [&](json body) {
    auto r = http_request(kHost, s.port, {"POST", "/v1/completions", body.dump(), ""});
    EXPECT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 200) << r->body;
    const json j = json::parse(r->body);
    return std::make_pair(j["choices"][0]["text"].get<std::string>(), j["usage"]["completion_tokens"].get<int>());
  };
  json unset = {{"model", "tiny"}, {"prompt", "Once upon a time"}, {"max_tokens", 50}, {"ignore_eos", true}};
  const auto first = text_of(unset);
  EXPECT_EQ(first.second, 5) << "max_new_tokens 5 caps max_tokens 50";
  for (int i = 0; i < 3; ++i) EXPECT_EQ(text_of(unset), first) << "no temperature: the default 0, greedy";
  json explicit_greedy = unset;
  explicit_greedy["temperature"] = 0;
  EXPECT_EQ(text_of(explicit_greedy), first);
  // The request's own temperature: sampled (at 2.0 over this model's flat distribution, 8 seeds
  // cannot all give the greedy text).
  json hot = unset;
  hot["temperature"] = 2.0;
  bool differs = false;
  for (int seed = 0; seed < 8 && !differs; ++seed) {
    hot["seed"] = seed;
    differs = text_of(hot).first != first.first;
  }
  EXPECT_TRUE(differs);
  s.server.reset();
}

// vLLM's POST /reset_prefix_cache and SGLang's /flush_cache: 404 unless allowed; then the next
// run of a prompt reports no cached tokens; the API key applies when one is set.
TEST(ServerCacheReset, RoutesEmptyThePrefixCacheWhenAllowed) {
  {
    Served off = serve();
    EXPECT_EQ(http_request(kHost, off.port, {"POST", "/reset_prefix_cache", "", ""})->status, 404);
    EXPECT_EQ(http_request(kHost, off.port, {"GET", "/flush_cache", "", ""})->status, 404);
    off.server.reset();
  }
  ServerOptions o;
  o.allow_cache_reset = true;
  o.api_key = "sekret";
  Served s = serve(o);
  std::string prompt;
  for (int i = 0; i < 12; ++i) prompt += "The kitchen brigade cooks " + std::to_string(i) + ". ";
  auto call = [&](const std::string& method, const std::string& target, const std::string& key = "sekret") {
    auto r = http_request(kHost, s.port, {method, target, method == "POST" ? "{}" : "", key});
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    return r ? *r : ClientResponse{};
  };
  auto cached = [&] {
    auto r = http_request(kHost, s.port, {"POST", "/v1/completions", greedy(prompt, 2).dump(), "sekret"});
    EXPECT_TRUE(r.has_value() && r->status == 200);
    return r ? json::parse(r->body)["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>() : -1;
  };
  EXPECT_EQ(cached(), 0);
  EXPECT_GT(cached(), 0);
  EXPECT_EQ(call("POST", "/reset_prefix_cache", "").status, 401);
  const ClientResponse reset = call("POST", "/reset_prefix_cache");
  ASSERT_EQ(reset.status, 200) << reset.body;
  const json j = json::parse(reset.body);
  EXPECT_GT(j["freed_pages"].get<int>(), 0);
  EXPECT_EQ(j["kept_pages"], 0);
  EXPECT_EQ(cached(), 0) << "computed afresh";
  EXPECT_GT(cached(), 0);
  const ClientResponse flush = call("GET", "/flush_cache");
  ASSERT_EQ(flush.status, 200) << flush.body;
  EXPECT_GT(json::parse(flush.body)["freed_pages"].get<int>(), 0);
  EXPECT_EQ(cached(), 0);
  EXPECT_EQ(call("GET", "/reset_prefix_cache").status, 405);
  EXPECT_EQ(call("POST", "/flush_cache?disk=yes").status, 400);
  const ClientResponse no_disk = call("POST", "/reset_prefix_cache?disk=true");
  EXPECT_EQ(no_disk.status, 200) << "no disk tier: nothing to clear";
  EXPECT_EQ(json::parse(no_disk.body)["disk_tier_pages"], 0);
  s.server.reset();
}

TEST(ServerOverload, FullQueueAnswers429ThenRecovers) {
  Served s = serve({}, /*max_running=*/1, /*max_waiting=*/1);
  const std::string body = greedy("busy", 600).dump();
  std::vector<std::future<int>> clients;
  for (int i = 0; i < 8; ++i) {
    clients.push_back(std::async(std::launch::async, [&] {
      auto r = http_request(kHost, s.port, {"POST", "/v1/completions", body, ""});
      EXPECT_TRUE(r.has_value());
      if (r && r->status == 429) {
        EXPECT_EQ(json::parse(r->body)["error"]["code"], "out_of_resources");
      }
      return r ? r->status : 0;
    }));
  }
  int n_ok = 0, n_429 = 0;
  for (auto& c : clients) {
    const int st = c.get();
    EXPECT_TRUE(st == 200 || st == 429) << st;
    n_ok += st == 200;
    n_429 += st == 429;
  }
  EXPECT_GE(n_ok, 1);
  EXPECT_GE(n_429, 1);
  // Load is gone: served again.
  EXPECT_EQ(http_request(kHost, s.port, {"POST", "/v1/completions", greedy("calm", 4).dump(), ""})->status, 200);
  s.server.reset();
}

TEST(ServerStations, ARateLimitByUserAnswers429WithTheWait) {
  Served s = serve({}, 64, 1024, {{"limit", "rate_limit", false, {{"requests_per_minute", "1"}}}});
  const auto as = [](const std::string& user) {
    json body = greedy("hi", 2);
    body["user"] = user;
    return body.dump();
  };
  EXPECT_EQ(http_request(kHost, s.port, {"POST", "/v1/completions", as("ann"), ""})->status, 200);
  auto again = http_request(kHost, s.port, {"POST", "/v1/completions", as("ann"), ""});
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->status, 429);
  const json err = json::parse(again->body)["error"];
  EXPECT_EQ(err["code"], "out_of_resources");
  // The bucket refills one request a minute: the wait is up to 60 s, in whole seconds.
  ASSERT_FALSE(again->retry_after.empty());
  EXPECT_GE(std::stoi(again->retry_after), 59);
  EXPECT_LE(std::stoi(again->retry_after), 60);
  EXPECT_NE(err["message"].get<std::string>().find("rate limit for user 'ann' reached (1 requests per minute); retry in"),
            std::string::npos)
      << err.dump();
  EXPECT_EQ(http_request(kHost, s.port, {"POST", "/v1/completions", as("bob"), ""})->status, 200);
  const std::string metrics = http_request(kHost, s.port, {"GET", "/metrics", "", ""})->body;
  EXPECT_NE(metrics.find("\nbrigade_station_requests_total{station=\"limit\",outcome=\"passed\"} 2\n"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("\nbrigade_station_requests_total{station=\"limit\",outcome=\"rejected\"} 1\n"),
            std::string::npos);
  EXPECT_NE(metrics.find("\nbrigade_station_requests_held{station=\"limit\"} 0\n"), std::string::npos);
  s.server.reset();
}

}  // namespace
}  // namespace brigade::server
