// LoRA adapters through the HTTP server (--lora-modules): `model` selects the base or an
// adapter, an unknown name is a 404 naming the served ones (vLLM's "does not exist"), /v1/models lists the adapters with
// their parent. The first token's logprob is checked against transformers + PEFT
// (tests/fixtures/lora, scripts/make_lora_fixtures.py). With --allow-runtime-lora-updating,
// vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter change what is served.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>

#include "server/http_client.h"
#include "server/http_server.h"
#include "tests/engine_test_util.h"
#include "tests/models/hf_fixture.h"

namespace brigade::server {
namespace {

using nlohmann::json;

// POST `body` to `path` on the local server (a failed request fails the test, and answers status 0).
ClientResponse post_json(int port, const std::string& path, const json& body) {
  auto r = http_request("127.0.0.1", port, {"POST", path, body.dump(), ""});
  EXPECT_TRUE(r.has_value());
  return r ? *r : ClientResponse{};
}

TEST(HttpLora, ModelNameSelectsTheAdapter) {
  EngineOptions o = testing::test_engine_options(testing::fixture_dir("llama"), 1);
  o.lora_modules = {{"all", testing::fixture_dir("lora/all_r4")}, {"rs", testing::fixture_dir("lora/rslora_qv")}};
  auto engine = testing::create_engine(o);
  ASSERT_NE(engine, nullptr);
  ServerOptions so;
  so.port = 0;
  so.model_name = "base";
  auto srv = HttpServer::start(*engine, so);
  ASSERT_TRUE(srv.has_value()) << srv.status().to_string();
  const int port = (*srv)->port();
  auto post = [&](const json& body) { return post_json(port, "/v1/completions", body); };
  const char* fixtures[] = {"llama", "lora/all_r4", "lora/rslora_qv"};
  const char* names[] = {"base", "all", "rs"};
  for (int k = 0; k < 3; ++k) {
    SCOPED_TRACE(names[k]);
    const testing::FixtureCase fc = testing::read_fixture_cases(fixtures[k]).front();
    const json body = {{"model", names[k]}, {"prompt", fc.prompt}, {"max_tokens", 1},
                       {"temperature", 0},  {"logprobs", 0},       {"ignore_eos", true}};
    const ClientResponse r = post(body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = json::parse(r.body);
    EXPECT_EQ(j["model"], names[k]);
    const double lp = j["choices"][0]["logprobs"]["token_logprobs"][0].get<double>();
    EXPECT_NEAR(lp, testing::reference_logprob(fc.logits.back(), fc.greedy[0]), 2 * testing::kLogitTol);
  }
  const ClientResponse bad = post({{"model", "nope"}, {"prompt", {1, 2, 3}}, {"max_tokens", 1}});
  EXPECT_EQ(bad.status, 404);
  EXPECT_NE(bad.body.find("The model `nope` does not exist; served: base, all, rs"), std::string::npos) << bad.body;

  auto models = http_request("127.0.0.1", port, {"GET", "/v1/models", "", ""});
  ASSERT_TRUE(models.has_value());
  const json data = json::parse(models->body)["data"];
  ASSERT_EQ(data.size(), 3u);
  EXPECT_EQ(data[0]["id"], "base");
  EXPECT_TRUE(data[0]["parent"].is_null());
  EXPECT_EQ(data[1]["id"], "all");
  EXPECT_EQ(data[1]["parent"], "base");
  EXPECT_EQ(data[1]["root"], testing::fixture_dir("lora/all_r4"));
  EXPECT_EQ(data[2]["id"], "rs");
  srv->reset();
}

// The runtime routes as vLLM answers them: load, serve (PEFT's logprob), list, unload, and the
// errors; off (404) unless the server allows them.
TEST(HttpLora, AdaptersLoadAndUnloadOverHttp) {
  EngineOptions o = testing::test_engine_options(testing::fixture_dir("llama"), 1);
  o.enable_lora = true;
  o.max_loras = 1;
  auto engine = testing::create_engine(o);
  ASSERT_NE(engine, nullptr);
  ServerOptions so;
  so.port = 0;
  so.model_name = "base";
  {
    auto off = HttpServer::start(*engine, so);
    ASSERT_TRUE(off.has_value());
    auto r = http_request("127.0.0.1", (*off)->port(),
                          {"POST", "/v1/load_lora_adapter", json{{"lora_name", "a"}, {"lora_path", "/x"}}.dump(), ""});
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 404) << r->body;
  }
  so.allow_runtime_lora_updating = true;
  auto srv = HttpServer::start(*engine, so);
  ASSERT_TRUE(srv.has_value()) << srv.status().to_string();
  const int port = (*srv)->port();
  auto post = [&](const char* path, const json& body) { return post_json(port, path, body); };
  const testing::FixtureCase fc = testing::read_fixture_cases("lora/all_r4").front();
  const json completion = {{"model", "all"}, {"prompt", fc.prompt}, {"max_tokens", 1},
                           {"temperature", 0}, {"logprobs", 0},    {"ignore_eos", true}};
  // Before the load the name is not served (LoRA is on, so the model field is checked): 404, as vLLM's.
  EXPECT_EQ(post("/v1/completions", completion).status, 404);

  ClientResponse r = post("/v1/load_lora_adapter", {{"lora_name", "all"}, {"lora_path", testing::fixture_dir("lora/all_r4")}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "Success: LoRA adapter 'all' added successfully.");
  r = post("/v1/completions", completion);
  ASSERT_EQ(r.status, 200) << r.body;
  const double lp = json::parse(r.body)["choices"][0]["logprobs"]["token_logprobs"][0].get<double>();
  EXPECT_NEAR(lp, testing::reference_logprob(fc.logits.back(), fc.greedy[0]), 2 * testing::kLogitTol);
  auto models = http_request("127.0.0.1", port, {"GET", "/v1/models", "", ""});
  ASSERT_TRUE(models.has_value());
  ASSERT_EQ(json::parse(models->body)["data"].size(), 2u);
  EXPECT_EQ(json::parse(models->body)["data"][1]["id"], "all");

  // Errors: the same name again, no free slot, a bad body, the served name, files that are no adapter.
  r = post("/v1/load_lora_adapter", {{"lora_name", "all"}, {"lora_path", testing::fixture_dir("lora/all_r4")}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("already loaded"), std::string::npos) << r.body;
  r = post("/v1/load_lora_adapter", {{"lora_name", "rs"}, {"lora_path", testing::fixture_dir("lora/rslora_qv")}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("max_loras"), std::string::npos) << r.body;
  EXPECT_EQ(post("/v1/load_lora_adapter", {{"lora_name", "rs"}}).status, 400);
  EXPECT_EQ(post("/v1/load_lora_adapter", json::array()).status, 400);
  EXPECT_EQ(post("/v1/load_lora_adapter", {{"lora_name", "base"}, {"lora_path", "/x"}}).status, 400);

  r = post("/v1/unload_lora_adapter", {{"lora_name", "all"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "Success: LoRA adapter 'all' removed successfully.");
  EXPECT_EQ(post("/v1/completions", completion).status, 404);
  r = post("/v1/unload_lora_adapter", {{"lora_name", "all"}});
  EXPECT_EQ(r.status, 404) << r.body;
  r = post("/v1/load_lora_adapter", {{"lora_name", "x"}, {"lora_path", testing::fixture_dir("llama")}});
  EXPECT_EQ(r.status, 404) << r.body;  // no adapter_config.json there
  EXPECT_EQ(engine->loras().size(), 0u);
  // The slot is free again: rs loads into it.
  r = post("/v1/load_lora_adapter", {{"lora_name", "rs"}, {"lora_path", testing::fixture_dir("lora/rslora_qv")}});
  EXPECT_EQ(r.status, 200) << r.body;
  // load_inplace replaces an adapter of that name, which needs a second slot (this server has one).
  r = post("/v1/load_lora_adapter",
           {{"lora_name", "rs"}, {"lora_path", testing::fixture_dir("lora/all_r4")}, {"load_inplace", true}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("max_loras"), std::string::npos) << r.body;
  EXPECT_EQ(post("/v1/load_lora_adapter",
                 {{"lora_name", "rs"}, {"lora_path", testing::fixture_dir("lora/all_r4")}, {"load_inplace", "yes"}})
                .status,
            400);
  auto get = http_request("127.0.0.1", port, {"GET", "/v1/load_lora_adapter", "", ""});
  ASSERT_TRUE(get.has_value());
  EXPECT_EQ(get->status, 405);
  srv->reset();
}

}  // namespace
}  // namespace brigade::server
