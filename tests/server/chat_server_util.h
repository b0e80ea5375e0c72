// Shared by the chat server tests: a tiny synthetic model with a given chat template, and the
// HTTP server over an engine on it, in-process.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "models/make_model.h"
#include "server/http_client.h"
#include "server/http_server.h"
#include "tests/engine_test_util.h"

namespace brigade::server::testing {

// A tiny synthetic model (under the temp dir, named by `tag`) whose tokenizer_config.json carries
// `chat_template` (bos_token "<s>", eos_token "</s>"); its context is max_position tokens (a long
// template's prompt, spelled in bytes, needs more than the default).
inline std::string model_with_template(const std::string& tag, const std::string& chat_template,
                                       int max_position = 2048) {
  namespace fs = std::filesystem;
  const fs::path d = fs::temp_directory_path() / ("brigade_chat_server_" + tag + "_" + std::to_string(::getpid()));
  EXPECT_TRUE(write_synthetic_model(brigade::testing::tiny_llama(512, max_position, 11), d.string()).is_ok());
  std::ifstream in(d / "tokenizer_config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config["chat_template"] = chat_template;
  std::ofstream(d / "tokenizer_config.json") << config.dump();
  return d.string();
}

// model_with_template's model whose last vocabulary entries become `tags`, added tokens as in the
// real tokenizers (`special` as their tokenizer.json marks them); returns their ids.
// Each tag with its own `special` flag.
inline std::vector<int32_t> add_tokens(const std::string& model, const std::vector<std::pair<std::string, bool>>& tags) {
  namespace fs = std::filesystem;
  const fs::path path = fs::path(model) / "tokenizer.json";
  nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
  nlohmann::json& vocab = j["model"]["vocab"];
  nlohmann::json& merges = j["model"]["merges"];
  std::vector<int32_t> ids;
  for (size_t t = 0; t < tags.size(); ++t) {
    const int32_t id = static_cast<int32_t>(vocab.size() - tags.size() + t);
    std::string piece;
    for (auto it = vocab.begin(); it != vocab.end(); ++it)
      if (it.value() == id) piece = it.key();
    vocab.erase(piece);
    // The merge that made the piece goes too (the last pieces are nobody's parts).
    for (size_t m = 0; m < merges.size(); ++m) {
      std::string pair = merges[m];
      pair.erase(pair.find(' '), 1);
      if (pair == piece) {
        merges.erase(m);
        break;
      }
    }
    vocab[tags[t].first] = id;
    j["added_tokens"].push_back({{"id", id}, {"content", tags[t].first}, {"single_word", false}, {"lstrip", false},
                                 {"rstrip", false}, {"normalized", false}, {"special", tags[t].second}});
    ids.push_back(id);
  }
  std::ofstream(path) << j.dump();
  return ids;
}

inline std::vector<int32_t> add_tokens(const std::string& model, const std::vector<std::string>& tags, bool special) {
  std::vector<std::pair<std::string, bool>> each;
  for (const std::string& t : tags) each.emplace_back(t, special);
  return add_tokens(model, each);
}

// `<think>` and `</think>` as in Qwen3's tokenizer (not special: they stay in the text).
inline std::pair<int32_t, int32_t> add_think_tokens(const std::string& model) {
  const auto ids = add_tokens(model, {"<think>", "</think>"}, /*special=*/false);
  return {ids[0], ids[1]};
}

// An engine on `model` (64 MiB of KV; `chat_template` as EngineOptions') and the server over it
// on any port with `options`, model id "tiny". Either is null, and the test
// has failed, when it did not start. The server goes first: it serves the engine.
struct TestServer {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<HttpServer> server;
  ~TestServer() { server.reset(); }
};

inline void start_test_server(TestServer& out, const std::string& model, ServerOptions options,
                              const std::string& chat_template = "") {
  EngineOptions o = brigade::testing::test_engine_options(model, 1);
  o.topology.instances.front().kv.memory_mb = 64;
  o.chat_template = chat_template;
  out.engine = brigade::testing::create_engine(o);
  if (!out.engine) return;
  options.port = 0;
  options.model_name = "tiny";
  auto srv = HttpServer::start(*out.engine, options);
  EXPECT_TRUE(srv.has_value()) << srv.status().to_string();
  if (srv) out.server = std::move(*srv);
}

// JSON requests to a server a test starts into `served_` (its API key in `key_`): the body of a
// POST that must answer 200, or the error message of one that must fail.
class JsonTestServer {
 public:
  bool ok() const { return served_.server != nullptr; }
  ClientResponse call(const std::string& method, const std::string& path, const std::string& body,
                      const std::string& key) const {
    auto r = http_request("127.0.0.1", served_.server->port(), {method, path, body, key});
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    return r ? *r : ClientResponse{};
  }
  ClientResponse post(const std::string& path, const nlohmann::json& body) const {
    return call("POST", path, body.dump(), key_);
  }
  nlohmann::json ok_post(const std::string& path, const nlohmann::json& body) const {
    const ClientResponse r = post(path, body);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    return r.status == 200 ? nlohmann::json::parse(r.body) : nlohmann::json::object();
  }
  std::string error(const std::string& path, const nlohmann::json& body, int status = 400) const {
    const ClientResponse r = post(path, body);
    EXPECT_EQ(r.status, status) << path << " " << body.dump() << ": " << r.body;
    const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
    return j.is_object() && j.contains("error") ? j["error"]["message"].get<std::string>() : r.body;
  }

 protected:
  explicit JsonTestServer(std::string key) : key_(std::move(key)) {}
  std::string key_;
  TestServer served_;
};

// The server (any port, model id "tiny") over an engine on `model`; `chat_template` as
// EngineOptions::chat_template, `reasoning_parser` and `tool_call_parser` as ServerOptions'.
// ok() is false (and the test has failed) when either did not start.
class ChatTestServer {
 public:
  explicit ChatTestServer(const std::string& model, const std::string& chat_template = "",
                          const std::string& reasoning_parser = "none", const std::string& tool_call_parser = "") {
    ServerOptions options;
    options.reasoning_parser = reasoning_parser;
    options.tool_call_parser = tool_call_parser;
    start_test_server(served_, model, options, chat_template);
  }
  // Any server options (the model's own chat template).
  ChatTestServer(const std::string& model, const ServerOptions& options) { start_test_server(served_, model, options); }
  bool ok() const { return served_.server != nullptr; }
  Engine& engine() const { return *served_.engine; }

  ClientResponse post(const std::string& path, const nlohmann::json& body) const { return post_raw(path, body.dump()); }
  ClientResponse post_raw(const std::string& path, const std::string& body) const {
    auto r = http_request("127.0.0.1", served_.server->port(), {"POST", path, body, ""});
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    return r ? *r : ClientResponse{};
  }
  ClientResponse chat(const nlohmann::json& body) const { return post("/v1/chat/completions", body); }
  // The raw body of a streamed POST to `path`.
  std::string stream_raw(const std::string& path, const nlohmann::json& body) const {
    std::string raw;
    auto r = http_stream("127.0.0.1", served_.server->port(), {"POST", path, body.dump(), ""}, [&](std::string_view piece) {
      raw += piece;
      return true;
    });
    EXPECT_TRUE(r.has_value() && r->status == 200) << raw;
    return raw;
  }
  // The streamed chunks of a chat (without [DONE]).
  std::vector<nlohmann::json> chat_stream(nlohmann::json body) const {
    body["stream"] = true;
    SseSplitter split;
    std::vector<std::string> events;
    auto r = http_stream("127.0.0.1", served_.server->port(), {"POST", "/v1/chat/completions", body.dump(), ""},
                         [&](std::string_view piece) {
                           split.feed(piece, events);
                           return true;
                         });
    EXPECT_TRUE(r.has_value() && r->status == 200);
    std::vector<nlohmann::json> out;
    for (const auto& e : events) {
      if (e != "[DONE]") out.push_back(nlohmann::json::parse(e));
    }
    return out;
  }

 private:
  TestServer served_;
};

// get_weather(city, days) and get_time(), the tools the tool-call syntax tests offer.
inline const nlohmann::json& weather_and_time_tools() {
  using nlohmann::json;
  static const json tools = json::array(
      {{{"type", "function"},
        {"function", {{"name", "get_weather"}, {"description", "Weather of a city."},
                      {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}, {"days", {{"type", "integer"}}}}}}}}}},
       {{"type", "function"}, {"function", {{"name", "get_time"}, {"description", "The time."},
                                            {"parameters", {{"type", "object"}, {"properties", json::object()}}}}}}});
  return tools;
}

// A chat whose output is exactly `output` (greedy, one guided choice), weather_and_time_tools
// offered with tool_choice auto; `extra`: more members of the body.
inline nlohmann::json forced_output_chat(const std::string& output, const nlohmann::json& extra = nlohmann::json::object()) {
  nlohmann::json body = {{"model", "tiny"},
                         {"messages", {{{"role", "user"}, {"content", "Weather in Oslo?"}}}},
                         {"tools", weather_and_time_tools()},
                         {"tool_choice", "auto"},
                         {"guided_choice", {output}},
                         {"max_tokens", 400},
                         {"temperature", 0}};
  body.update(extra);
  return body;
}

// A chat answer, read whole or from its stream: reasoning and content null where absent.
struct ChatAnswer {
  nlohmann::json reasoning = nullptr, content = nullptr;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  std::string finish;
  std::vector<std::string> ids;  // the calls' ids
};

// The answer to `body` whole (it must answer 200); `reasoning` equals `reasoning_content`.
inline ChatAnswer whole_answer(const ChatTestServer& s, const nlohmann::json& body) {
  using nlohmann::json;
  ChatAnswer a;
  auto r = s.chat(body);
  EXPECT_EQ(r.status, 200) << r.body;
  if (r.status != 200) return a;
  const json choice = json::parse(r.body)["choices"][0];
  const json& m = choice["message"];
  if (m.contains("reasoning_content")) {
    a.reasoning = m["reasoning_content"];
    EXPECT_EQ(m.value("reasoning", json()), m["reasoning_content"]);
  }
  a.content = m["content"];
  for (const json& c : m.value("tool_calls", json::array())) {
    a.calls.push_back({c["function"]["name"].get<std::string>(), c["function"]["arguments"].get<std::string>()});
    a.ids.push_back(c["id"].get<std::string>());
  }
  a.finish = choice["finish_reason"].get<std::string>();
  return a;
}

// The answer to `body` streamed, its deltas joined (empty reasoning or content: null).
inline ChatAnswer streamed_answer(const ChatTestServer& s, const nlohmann::json& body) {
  using nlohmann::json;
  ChatAnswer a;
  std::string reasoning, content;
  for (const json& chunk : s.chat_stream(body)) {
    const json& ch = chunk["choices"][0];
    if (ch["finish_reason"].is_string()) a.finish = ch["finish_reason"].get<std::string>();
    const json& d = ch["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content") && d["content"].is_string()) content += d["content"].get<std::string>();
    for (const json& c : d.value("tool_calls", json::array())) {
      if (c.contains("id")) {
        a.calls.push_back({c["function"]["name"].get<std::string>(), ""});
        a.ids.push_back(c["id"].get<std::string>());
      }
      const size_t index = c["index"].get<size_t>();
      EXPECT_LT(index, a.calls.size()) << "a call's arguments before its id and name";
      if (index < a.calls.size()) a.calls[index].second += c["function"]["arguments"].get<std::string>();
    }
  }
  if (!reasoning.empty()) a.reasoning = reasoning;
  if (!content.empty()) a.content = content;
  return a;
}

}  // namespace brigade::server::testing
