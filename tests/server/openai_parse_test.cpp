// parse_completion_request: each field's types and ranges, and a fuzz run over random and
// mutated bodies (it must never throw or crash, and what it accepts must be in range).
#include "server/openai_parse.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <random>

namespace brigade::server {
namespace {

using nlohmann::json;

Expected<CompletionRequest> parse(const std::string& text, Endpoint ep = Endpoint::completions) {
  return parse_completion_body(text, ep);
}

TEST(OpenaiParse, FullCompletionRequest) {
  auto r = parse(R"({"model":"m","prompt":"hi","max_tokens":7,"temperature":0.5,"top_p":0.9,"top_k":5,
    "min_p":0.1,"n":3,"stream":true,"stop":["a","b"],"seed":42,"logprobs":2,"presence_penalty":0.5,
    "frequency_penalty":-0.5,"repetition_penalty":1.1,"ignore_eos":true,"user":"u",
    "stream_options":{"include_usage":true},"logit_bias":{"5":-100,"17":2.5},"min_tokens":3,
    "stop_token_ids":[7,8],"response_format":{"type":"json_object"}})");
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(r->gen.prompt, "hi");
  EXPECT_EQ(r->gen.max_tokens, 7);
  EXPECT_FLOAT_EQ(r->gen.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r->gen.sampling.top_p, 0.9f);
  EXPECT_EQ(r->gen.sampling.top_k, 5);
  EXPECT_FLOAT_EQ(r->gen.sampling.min_p, 0.1f);
  EXPECT_EQ(r->n, 3);
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  EXPECT_EQ(r->gen.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r->gen.sampling.seed, 42u);
  EXPECT_EQ(r->gen.logprobs, 2);
  EXPECT_FLOAT_EQ(r->gen.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r->gen.sampling.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(r->gen.sampling.repetition_penalty, 1.1f);
  EXPECT_TRUE(r->gen.ignore_eos);
  EXPECT_TRUE(r->gen.skip_special_tokens) << "vLLM's default";
  EXPECT_FALSE(parse(R"({"prompt":"x","skip_special_tokens":false})")->gen.skip_special_tokens);
  EXPECT_EQ(parse(R"({"prompt":"x","skip_special_tokens":1})").status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(r->gen.labels, (std::vector<std::pair<std::string, std::string>>{{"user", "u"}}));
  auto bias = r->gen.sampling.logit_bias;
  std::sort(bias.begin(), bias.end());
  EXPECT_EQ(bias, (std::vector<std::pair<int32_t, float>>{{5, -100.0f}, {17, 2.5f}}));
  EXPECT_EQ(r->gen.min_tokens, 3);
  EXPECT_EQ(r->gen.stop_ids, (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(r->gen.response_format, ResponseFormat::json_object);
  EXPECT_EQ(parse(R"({"prompt":"x","response_format":{"type":"text"}})")->gen.response_format, ResponseFormat::text);
}

// OpenAI's batch form: several prompts, n choices each; choice c runs prompt c / n with seed + c % n.
// The model's generation_config (ParseLimits::defaults) fills the sampling fields a request leaves
// out or sends null, never one it sets; its max_new_tokens caps max_tokens, given or not; a beam
// search takes none of the sampling defaults (a default repetition_penalty must not refuse it).
TEST(OpenaiParse, GenerationConfigDefaultsFillOnlyWhatIsLeftOut) {
  ParseLimits limits;
  limits.defaults.temperature = 0.7f;
  limits.defaults.top_p = 0.8f;
  limits.defaults.top_k = 20;
  limits.defaults.min_p = 0.05f;
  limits.defaults.repetition_penalty = 1.05f;
  limits.defaults.max_tokens = 100;
  auto d = parse_completion_body(R"({"prompt":"hi","top_p":null})", Endpoint::completions, limits);
  ASSERT_TRUE(d.has_value()) << d.status().to_string();
  EXPECT_FLOAT_EQ(d->gen.sampling.temperature, 0.7f);
  EXPECT_FLOAT_EQ(d->gen.sampling.top_p, 0.8f) << "null is left out";
  EXPECT_EQ(d->gen.sampling.top_k, 20);
  EXPECT_FLOAT_EQ(d->gen.sampling.min_p, 0.05f);
  EXPECT_FLOAT_EQ(d->gen.sampling.repetition_penalty, 1.05f);
  EXPECT_EQ(d->gen.max_tokens, 16) << "completions' own default, under the cap";
  auto own = parse_completion_body(R"({"messages":[{"role":"user","content":"hi"}],"temperature":0,"top_p":1,
    "top_k":-1,"min_p":0,"repetition_penalty":1,"max_tokens":500})", Endpoint::chat, limits);
  ASSERT_TRUE(own.has_value()) << own.status().to_string();
  EXPECT_FLOAT_EQ(own->gen.sampling.temperature, 0.0f);
  EXPECT_FLOAT_EQ(own->gen.sampling.top_p, 1.0f);
  EXPECT_EQ(own->gen.sampling.top_k, 0);
  EXPECT_FLOAT_EQ(own->gen.sampling.min_p, 0.0f);
  EXPECT_FLOAT_EQ(own->gen.sampling.repetition_penalty, 1.0f);
  EXPECT_EQ(own->gen.max_tokens, 100) << "max_new_tokens caps a larger max_tokens";
  auto chat = parse_completion_body(R"({"messages":[{"role":"user","content":"hi"}]})", Endpoint::chat, limits);
  ASSERT_TRUE(chat.has_value());
  EXPECT_EQ(chat->gen.max_tokens, 100) << "chat's to-the-end default, capped";
  auto beam = parse_completion_body(R"({"prompt":"hi","use_beam_search":true,"n":2,"max_tokens":4})",
                                    Endpoint::completions, limits);
  ASSERT_TRUE(beam.has_value()) << beam.status().to_string();
  EXPECT_FLOAT_EQ(beam->gen.sampling.repetition_penalty, 1.0f);
  auto plain = parse_completion_body(R"({"prompt":"hi"})", Endpoint::completions);
  ASSERT_TRUE(plain.has_value());
  EXPECT_FLOAT_EQ(plain->gen.sampling.temperature, 1.0f) << "without defaults: brigade's own";
  EXPECT_EQ(plain->gen.sampling.top_k, 0);
}

TEST(OpenaiParse, SeveralPromptsGiveNChoicesEach) {
  auto r = parse(R"({"prompt":["one","two","three"],"n":2,"seed":10})");
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  ASSERT_EQ(r->prompts.size(), 3u);
  EXPECT_EQ(r->n_choices(), 6);
  EXPECT_EQ(r->gen.prompt, "one");
  for (int c = 0; c < 6; ++c) {
    const GenerateOptions g = r->choice_request(c);
    EXPECT_EQ(g.prompt, (std::vector<std::string>{"one", "two", "three"})[static_cast<size_t>(c / 2)]) << c;
    EXPECT_EQ(g.sampling.seed, std::optional<uint64_t>(10 + c % 2)) << c;
  }
  auto ids = parse(R"({"prompt":[[1,2],[3]],"echo":true})");
  ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
  EXPECT_EQ(ids->choice_request(1).prompt_ids, (std::vector<int32_t>{3}));
  ids->echo_texts = {"ab", "c"};
  EXPECT_EQ(ids->echo_of(1), "c");

  ParseLimits limits;
  limits.max_prompts = 2;
  limits.max_choices = 5;
  for (const auto& [body, says] : std::vector<std::pair<std::string, std::string>>{
           {R"({"prompt":["a",[1]]})", "mixes strings and token id arrays"},
           {R"({"prompt":["a",""]})", "'prompt[1]' is empty"},
           {R"({"prompt":[[1],[]]})", "'prompt[1]' is an empty array"},
           {R"({"prompt":["a","b","c"]})", "at most 2 are allowed"},
           {R"({"prompt":["a","b"],"n":3})", "at most 5 choices"}}) {
    auto bad = parse_completion_body(body, Endpoint::completions, limits);
    ASSERT_FALSE(bad.has_value()) << body;
    EXPECT_EQ(bad.status().code(), StatusCode::invalid_argument) << body;
    EXPECT_NE(bad.status().message().find(says), std::string::npos) << bad.status().message();
  }
}

TEST(OpenaiParse, PromptForms) {
  EXPECT_EQ(parse(R"({"prompt":[1,2,3]})")->gen.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(parse(R"({"prompt":["one"]})")->gen.prompt, "one");
  EXPECT_EQ(parse(R"({"prompt":[[4,5]]})")->gen.prompt_ids, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(parse(R"({"prompt":"x","stop":"s"})")->gen.stop, (std::vector<std::string>{"s"}));
  EXPECT_EQ(parse(R"({"prompt":"x","max_completion_tokens":9})")->gen.max_tokens, 9);
  EXPECT_EQ(parse(R"({"prompt":"x"})")->gen.max_tokens, 16);
  EXPECT_EQ(parse(R"({"prompt":"x","top_k":-1})")->gen.sampling.top_k, 0);
}

TEST(OpenaiParse, ChatMessagesAndLogprobs) {
  auto r = parse(R"({"messages":[{"role":"system","content":"be brief"},
    {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
    "logprobs":true,"top_logprobs":3})", Endpoint::chat);
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  ASSERT_EQ(r->messages.size(), 2u);
  EXPECT_EQ(r->messages[1].content, "a\nb") << "text parts joined by newlines, as vLLM renders them";
  EXPECT_TRUE(r->chat_logprobs);
  EXPECT_EQ(r->gen.logprobs, 3);
  EXPECT_EQ(r->gen.max_tokens, std::numeric_limits<int32_t>::max()) << "chat: to the end of the context";
}

TEST(OpenaiParse, BadInputsAreInvalidArgument) {
  const char* bad[] = {
      "{not json",
      "[1,2]",
      R"({})",
      R"({"prompt":5})",
      R"({"prompt":""})",
      R"({"prompt":[]})",
      R"({"prompt":[1,-2]})",
      R"({"prompt":[1,"a"]})",
      R"({"prompt":"x","max_tokens":0})",
      R"({"prompt":"x","max_tokens":-3})",
      R"({"prompt":"x","max_tokens":"10"})",
      R"({"prompt":"x","max_tokens":1.5})",
      R"({"prompt":"x","max_tokens":99999999999999})",
      R"({"prompt":"x","temperature":-0.1})",
      R"({"prompt":"x","temperature":"hot"})",
      R"({"prompt":"x","top_p":0})",
      R"({"prompt":"x","top_p":1.01})",
      R"({"prompt":"x","n":0})",
      R"({"prompt":"x","n":17})",
      R"({"prompt":"x","n":100000})",
      R"({"prompt":"x","stream":"yes"})",
      R"({"prompt":"x","stop":7})",
      R"({"prompt":"x","stop":[""]})",
      R"({"prompt":"x","seed":1.5})",
      R"({"prompt":"x","logprobs":21})",
      R"({"prompt":"x","prompt_logprobs":21})",
      R"({"prompt":"x","prompt_logprobs":-1})",
      R"({"prompt":"x","prompt_logprobs":true})",
      R"({"prompt":"x","echo":"yes"})",
      R"({"prompt":"x","logprobs":true})",
      R"({"prompt":"x","presence_penalty":3})",
      R"({"prompt":"x","repetition_penalty":0})",
      R"({"prompt":"x","min_p":1})",
      R"({"prompt":"x","model":3})",
      R"({"prompt":"x","stream_options":[]})",
      R"({"prompt":"x","logit_bias":[1]})",
      R"({"prompt":"x","logit_bias":{"a":1}})",
      R"({"prompt":"x","logit_bias":{"5x":1}})",
      R"({"prompt":"x","logit_bias":{"":1}})",
      R"({"prompt":"x","logit_bias":{"99999999999":1}})",
      R"({"prompt":"x","logit_bias":{"5":"1"}})",
      R"({"prompt":"x","logit_bias":{"5":100.5}})",
      R"({"prompt":"x","min_tokens":-1})",
      R"({"prompt":"x","min_tokens":"2"})",
      R"({"prompt":"x","stop_token_ids":5})",
      R"({"prompt":"x","stop_token_ids":[-1]})",
      R"({"prompt":"x","stop_token_ids":[1.5]})",
      R"({"prompt":"x","response_format":"json"})",
      R"({"prompt":"x","response_format":{}})",
      R"({"prompt":"x","response_format":{"type":"yaml"}})",
      R"({"prompt":"x","response_format":{"type":"json_schema","json_schema":{}}})",
      R"({"prompt":"x","response_format":{"type":"json_schema"}})",
      R"({"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":1,"schema":{}}}})",
      R"({"prompt":"x","response_format":{"type":"json_schema","json_schema":{"schema":{},"strict":"yes"}}})",
      R"({"prompt":"x","response_format":{"type":"json_schema","json_schema":{"schema":5}}})",
      R"({"prompt":"x","guided_json":5})",
      R"({"prompt":"x","guided_choice":[]})",
      R"({"prompt":"x","guided_choice":"a"})",
      R"({"prompt":"x","guided_choice":["a",1]})",
      R"({"prompt":"x","guided_choice":["a"],"guided_json":{}})",
      R"({"prompt":"x","guided_choice":["a"],"response_format":{"type":"json_object"}})",
      R"({"prompt":"x","guided_regex":""})",
      R"({"prompt":"x","guided_regex":["a"]})",
      R"({"prompt":"x","regex":5})",
      R"({"prompt":"x","guided_regex":"a","regex":"b"})",
      R"({"prompt":"x","guided_regex":"a","guided_choice":["a"]})",
      R"({"prompt":"x","regex":"a","response_format":{"type":"json_object"}})",
      R"({"prompt":"x","response_format":{"type":"regex","regex":"a"}})",
  };
  for (const char* b : bad) {
    auto r = parse(b);
    ASSERT_FALSE(r.has_value()) << b;
    EXPECT_EQ(r.status().code(), StatusCode::invalid_argument) << b << " -> " << r.status().to_string();
    EXPECT_FALSE(r.status().message().empty());
  }
  const char* bad_chat[] = {R"({"messages":"hi"})", R"({"messages":[]})", R"({"messages":[{"role":"robot","content":"x"}]})",
                            R"({"messages":[{"role":"user","content":5}]})",
                            R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})",
                            R"({"messages":[{"role":"user","content":"x"}],"logprobs":3})"};
  for (const char* b : bad_chat) {
    auto r = parse(b, Endpoint::chat);
    ASSERT_FALSE(r.has_value()) << b;
    EXPECT_EQ(r.status().code(), StatusCode::invalid_argument) << b;
  }
}

// response_format json_schema, guided_json and guided_choice; the schema keeps its key order
// (the output's keys follow it).
TEST(OpenaiParse, StructuredOutputFields) {
  auto r = parse(R"({"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"p","strict":true,
                     "schema":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}}}}}})");
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(r->gen.response_format, ResponseFormat::json_schema);
  EXPECT_EQ(r->gen.json_schema, R"({"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}}})");
  r = parse(R"({"prompt":"x","guided_json":{"b":1,"a":2}})");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->gen.response_format, ResponseFormat::json_schema);
  EXPECT_EQ(r->gen.json_schema, R"({"b":1,"a":2})");
  r = parse(R"({"prompt":"x","guided_json":"{\"type\": \"string\"}"})");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->gen.json_schema, R"({"type": "string"})");
  r = parse(R"({"prompt":"x","guided_choice":["yes","no"],"response_format":{"type":"text"}})");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->gen.response_format, ResponseFormat::choice);
  EXPECT_EQ(r->gen.guided_choice, (std::vector<std::string>{"yes", "no"}));
  r = parse(R"({"prompt":"x","guided_regex":"\\d{3}-[a-z]+","response_format":{"type":"text"}})");  // vLLM
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(r->gen.response_format, ResponseFormat::regex);
  EXPECT_EQ(r->gen.regex, "\\d{3}-[a-z]+");
  r = parse(R"x({"messages":[{"role":"user","content":"hi"}],"regex":"(yes|no)"})x", Endpoint::chat);  // SGLang
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(r->gen.response_format, ResponseFormat::regex);
  EXPECT_EQ(r->gen.regex, "(yes|no)");
}

// A GBNF grammar under each name servers use: vLLM's guided_grammar and structured_outputs.grammar,
// llama.cpp's grammar, SGLang's ebnf; vLLM's structured_outputs for the other kinds too.
TEST(OpenaiParse, GrammarFields) {
  const std::string g = R"(root ::= \"yes\" | \"no\")";  // JSON-escaped
  for (const std::string field : {"guided_grammar", "grammar", "ebnf"}) {
    auto r = parse(R"({"prompt":"x",")" + field + R"(":")" + g + R"("})");
    ASSERT_TRUE(r.has_value()) << field << ": " << r.status().to_string();
    EXPECT_EQ(r->gen.response_format, ResponseFormat::grammar) << field;
    EXPECT_EQ(r->gen.grammar, "root ::= \"yes\" | \"no\"") << field;
  }
  auto r = parse(R"({"messages":[{"role":"user","content":"hi"}],"structured_outputs":{"grammar":")" + g + R"("}})", Endpoint::chat);
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(r->gen.response_format, ResponseFormat::grammar);
  EXPECT_EQ(r->gen.grammar, "root ::= \"yes\" | \"no\"");
  r = parse(R"({"prompt":"x","structured_outputs":{"json":{"b":1,"a":2}}})");
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(r->gen.response_format, ResponseFormat::json_schema);
  EXPECT_EQ(r->gen.json_schema, R"({"b":1,"a":2})") << "the schema keeps its key order";
  r = parse(R"({"prompt":"x","structured_outputs":{"regex":"a+","grammar":null}})");
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(r->gen.response_format, ResponseFormat::regex);
  r = parse(R"({"prompt":"x","structured_outputs":{"choice":["a","b"]}})");
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(r->gen.guided_choice, (std::vector<std::string>{"a", "b"}));
  r = parse(R"({"prompt":"x","structured_outputs":{"json_object":true}})");
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(r->gen.response_format, ResponseFormat::json_object);
}

TEST(OpenaiParse, GrammarFieldErrors) {
  for (const auto& [body, says] : std::vector<std::pair<std::string, std::string>>{
           {R"({"prompt":"x","guided_grammar":""})", "'guided_grammar' must be a non-empty string"},
           {R"({"prompt":"x","grammar":5})", "'grammar' must be a non-empty string"},
           {R"({"prompt":"x","ebnf":["root"]})", "'ebnf' must be a non-empty string"},
           {R"({"prompt":"x","structured_outputs":{"grammar":{}}})", "'structured_outputs.grammar' must be"},
           {R"({"prompt":"x","structured_outputs":"root ::= x"})", "'structured_outputs' must be an object"},
           {R"({"prompt":"x","structured_outputs":{"structural_tag":"x"}})", "'structured_outputs.structural_tag' is not supported"},
           {R"({"prompt":"x","guided_grammar":"root ::= x","regex":"a"})", "at most one"},
           {R"({"prompt":"x","grammar":"root ::= x","ebnf":"root ::= x"})", "at most one"},
           {R"({"prompt":"x","structured_outputs":{"grammar":"root ::= x","regex":"a"}})", "at most one"},
           {R"({"prompt":"x","structured_outputs":{"grammar":"root ::= x"},"response_format":{"type":"json_object"}})", "at most one"}}) {
    auto r = parse(body);
    ASSERT_FALSE(r.has_value()) << body;
    EXPECT_EQ(r.status().code(), StatusCode::invalid_argument) << body;
    EXPECT_NE(r.status().message().find(says), std::string::npos) << body << " -> " << r.status().message();
  }
}

// lm-evaluation-harness scores with echo + logprobs + max_tokens 0; vLLM's prompt_logprobs too.
TEST(OpenaiParse, EchoAndPromptLogprobs) {
  auto r = parse(R"({"prompt":[1,2,3],"echo":true,"logprobs":1,"max_tokens":0})");
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_TRUE(r->echo);
  EXPECT_EQ(r->gen.max_tokens, 0);
  EXPECT_EQ(r->gen.logprobs, 1);
  EXPECT_EQ(r->gen.prompt_logprobs, 1) << "echo's logprobs cover the prompt";
  EXPECT_EQ(r->prompt_logprobs, -1) << "no prompt_logprobs list asked";
  r = parse(R"({"prompt":"x","echo":true,"max_tokens":0})");
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(r->gen.prompt_logprobs, 0) << "a prompt that is only scored still runs";
  r = parse(R"({"prompt":"x","echo":true})");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->gen.prompt_logprobs, -1) << "echo alone needs no logprobs";
  r = parse(R"({"prompt":"x","echo":true,"logprobs":2,"prompt_logprobs":5})");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->gen.prompt_logprobs, 5);
  EXPECT_EQ(r->prompt_logprobs, 5);
  r = parse(R"({"prompt":"x","prompt_logprobs":0,"max_tokens":0})");
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_FALSE(r->echo);
  auto chat = parse_completion_body(R"({"messages":[{"role":"user","content":"hi"}],"prompt_logprobs":2})", Endpoint::chat);
  ASSERT_TRUE(chat.has_value()) << chat.status().to_string();
  EXPECT_EQ(chat->gen.prompt_logprobs, 2);
  // Chat's echo repeats the last assistant message (routes.cpp); it scores nothing.
  chat = parse_completion_body(R"({"messages":[{"role":"user","content":"hi"}],"echo":true,"logprobs":true,
    "top_logprobs":2})", Endpoint::chat);
  ASSERT_TRUE(chat.has_value()) << chat.status().to_string();
  EXPECT_TRUE(chat->echo);
  EXPECT_EQ(chat->gen.prompt_logprobs, -1);
  chat = parse_completion_body(R"({"messages":[{"role":"user","content":"hi"}],"echo":true,"max_tokens":0})", Endpoint::chat);
  ASSERT_FALSE(chat.has_value()) << "chat's echo does not make max_tokens 0 a scoring request";
  // Refusals name the field.
  auto zero = parse(R"({"prompt":"x","max_tokens":0})");
  ASSERT_FALSE(zero.has_value());
  EXPECT_NE(zero.status().message().find("'max_tokens' 0"), std::string::npos) << zero.status().message();
  auto over = parse(R"({"prompt":"x","prompt_logprobs":21})");
  ASSERT_FALSE(over.has_value());
  EXPECT_NE(over.status().message().find("'prompt_logprobs'"), std::string::npos) << over.status().message();
}

TEST(OpenaiParse, UnsupportedFieldsAreRefused) {
  for (const char* b : {R"({"prompt":"x","best_of":2})"}) {
    auto r = parse(b);
    ASSERT_FALSE(r.has_value()) << b;
    EXPECT_EQ(r.status().code(), StatusCode::unsupported) << b;
  }
}

// Random JSON values of bounded depth, biased towards the fields and boundary values the parser
// looks at.
json random_value(std::mt19937_64& rng, int depth) {
  std::uniform_int_distribution<int> kind(0, depth > 0 ? 9 : 6);
  static const std::vector<json> specials = {0, -1, 1, 16, 17, 2147483648LL, -9223372036854775807LL,
                                             18446744073709551615ULL, 0.0, 1.0, -0.0, 1e308, -1e308, 0.5,
                                             "", "x", "\xff\xfe", true, false, nullptr};
  switch (kind(rng)) {
    case 0: return nullptr;
    case 1: return static_cast<bool>(rng() & 1);
    case 2: return static_cast<int64_t>(rng());
    case 3: return std::uniform_real_distribution<double>(-3, 3)(rng);
    case 4: return std::string(rng() % 5, static_cast<char>('a' + rng() % 26));
    case 5:
    case 6: return specials[rng() % specials.size()];
    case 7:
    case 8: {
      json a = json::array();
      for (int i = 0, n = static_cast<int>(rng() % 5); i < n; ++i) a.push_back(random_value(rng, depth - 1));
      return a;
    }
    default: {
      static const char* keys[] = {"role", "content", "type", "text", "include_usage", "x"};
      json o = json::object();
      for (int i = 0, n = static_cast<int>(rng() % 4); i < n; ++i) o[keys[rng() % 6]] = random_value(rng, depth - 1);
      return o;
    }
  }
}

json random_body(std::mt19937_64& rng) {
  static const char* fields[] = {"model", "prompt", "messages", "max_tokens", "max_completion_tokens", "temperature",
                                 "top_p", "top_k", "min_p", "n", "stream", "stream_options", "stop", "seed",
                                 "logprobs", "top_logprobs", "presence_penalty", "frequency_penalty",
                                 "repetition_penalty", "ignore_eos", "skip_special_tokens", "user", "echo", "best_of", "logit_bias",
                                 "min_tokens", "stop_token_ids", "response_format", "guided_json",
                                 "guided_choice", "prompt_logprobs", "guided_regex", "regex"};
  json body = json::object();
  if (rng() % 4 != 0) body["prompt"] = "hello";
  if (rng() % 4 != 0) body["messages"] = json::array({{{"role", "user"}, {"content", "hi"}}});
  for (int i = 0, n = static_cast<int>(rng() % 6); i < n; ++i) body[fields[rng() % std::size(fields)]] = random_value(rng, 3);
  return body;
}

void check_accepted(const CompletionRequest& r) {
  EXPECT_GE(r.n, 1);
  EXPECT_LE(r.n, 16);
  EXPECT_TRUE(r.gen.max_tokens >= 1 || r.gen.prompt_logprobs >= 0) << "max_tokens 0 only scores a prompt";
  EXPECT_LE(r.gen.prompt_logprobs, 20);
  if (r.echo) {
    EXPECT_GE(r.gen.prompt_logprobs, r.gen.logprobs);
  }
  EXPECT_GE(r.gen.sampling.temperature, 0.0f);
  EXPECT_GT(r.gen.sampling.top_p, 0.0f);
  EXPECT_LE(r.gen.sampling.top_p, 1.0f);
  EXPECT_LE(r.gen.logprobs, 20);
  EXPECT_TRUE(!r.gen.prompt.empty() || !r.gen.prompt_ids.empty() || !r.messages.empty());
}

TEST(OpenaiParse, ReasoningEffort) {
  const char* chat = R"({"messages": [{"role": "user", "content": "hi"}], "reasoning_effort": %s})";
  auto with = [&](const std::string& v) {
    std::string body = chat;
    body.replace(body.find("%s"), 2, v);
    return parse_completion_body(body, Endpoint::chat);
  };
  for (const char* effort : {"none", "minimal", "low", "medium", "high", "xhigh", "max"}) {  // vLLM's values
    auto r = with(std::string("\"") + effort + "\"");
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    EXPECT_EQ(r->reasoning_effort, effort);
  }
  EXPECT_EQ(with("null")->reasoning_effort, "");
  for (const char* bad : {"\"extreme\"", "\"\"", "\"None\"", "2", "[\"low\"]"}) {
    auto r = with(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::invalid_argument);
    EXPECT_NE(r.status().message().find("reasoning_effort"), std::string::npos) << r.status().message();
  }
}

// An assistant turn's reasoning sent back: reasoning_content or reasoning (which wins, as vLLM
// reads only it), strings or null, on assistant messages only.
TEST(OpenaiParse, ReasoningOfAssistantTurns) {
  auto chat = [](const std::string& assistant) {
    return parse_completion_body(R"({"messages": [{"role": "user", "content": "hi"}, )" + assistant +
                                     R"(, {"role": "user", "content": "again"}]})",
                                 Endpoint::chat);
  };
  auto r = chat(R"({"role": "assistant", "content": "4", "reasoning_content": "2+2=4"})");
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(r->messages[1].reasoning, "2+2=4");
  EXPECT_FALSE(r->messages[0].reasoning.has_value());
  EXPECT_EQ(chat(R"({"role": "assistant", "content": "4", "reasoning": "new"})")->messages[1].reasoning, "new");
  EXPECT_EQ(chat(R"({"role": "assistant", "content": "4", "reasoning": "new", "reasoning_content": "old"})")->messages[1].reasoning,
            "new");
  EXPECT_EQ(chat(R"({"role": "assistant", "content": "4", "reasoning": null, "reasoning_content": "old"})")->messages[1].reasoning,
            "old");
  EXPECT_EQ(chat(R"({"role": "assistant", "content": "4", "reasoning_content": ""})")->messages[1].reasoning, "")
      << "given, if empty";
  EXPECT_FALSE(chat(R"({"role": "assistant", "content": "4", "reasoning_content": null})")->messages[1].reasoning.has_value());
  for (const char* bad : {R"({"role": "assistant", "content": "4", "reasoning_content": 5})",
                          R"({"role": "assistant", "content": "4", "reasoning": ["a"]})",
                          R"({"role": "assistant", "content": "4", "reasoning_content": {"text": "a"}})"}) {
    auto e = chat(bad);
    ASSERT_FALSE(e.has_value()) << bad;
    EXPECT_EQ(e.status().code(), StatusCode::invalid_argument);
    EXPECT_NE(e.status().message().find("messages[1].reasoning"), std::string::npos) << e.status().message();
  }
  auto user = parse_completion_body(R"({"messages": [{"role": "user", "content": "hi", "reasoning_content": "x"}]})",
                                    Endpoint::chat);
  ASSERT_FALSE(user.has_value());
  EXPECT_NE(user.status().message().find("only valid on assistant messages"), std::string::npos) << user.status().message();
}

// vLLM's add_generation_prompt / continue_final_message: how the chat prompt ends.
TEST(OpenaiParse, HowTheChatPromptEnds) {
  auto ending = [](const std::string& fields) {
    return parse_completion_body(R"({"messages": [{"role": "user", "content": "hi"}])" + fields + "}", Endpoint::chat);
  };
  EXPECT_EQ(ending("")->chat_ending, Engine::ChatEnding::generation_prompt);
  EXPECT_EQ(ending(R"(, "add_generation_prompt": false)")->chat_ending, Engine::ChatEnding::none);
  EXPECT_EQ(ending(R"(, "add_generation_prompt": false, "continue_final_message": true)")->chat_ending,
            Engine::ChatEnding::continue_final);
  auto both = ending(R"(, "continue_final_message": true)");  // add_generation_prompt defaults to true, as vLLM's
  ASSERT_FALSE(both.has_value());
  EXPECT_EQ(both.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(both.status().message().find("'add_generation_prompt': false"), std::string::npos) << both.status().message();
  auto bad = ending(R"(, "continue_final_message": "yes")");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("continue_final_message"), std::string::npos) << bad.status().message();
}

// vLLM's request extras.
TEST(OpenaiParse, VllmSamplingExtras) {
  auto r = parse(R"({"prompt": "x", "allowed_token_ids": [7, 3], "include_stop_str_in_output": true,
    "truncate_prompt_tokens": 5, "priority": 3, "stream": true,
    "stream_options": {"include_usage": true, "continuous_usage_stats": true}})");
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(r->gen.sampling.allowed_token_ids, (std::vector<int32_t>{7, 3}));
  EXPECT_TRUE(r->gen.include_stop_str_in_output);
  EXPECT_EQ(r->gen.truncate_prompt_tokens, 5);
  EXPECT_EQ(r->gen.priority, -3) << "vLLM's lower-is-first priority, turned round";
  EXPECT_TRUE(r->continuous_usage);
  auto ids = parse(R"({"prompt": "x", "bad_words": ["Paris", " the end"], "return_token_ids": true,
    "return_tokens_as_token_ids": false, "cache_salt": "tenant-7"})");
  ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
  EXPECT_EQ(ids->gen.sampling.bad_words, (std::vector<std::string>{"Paris", " the end"}));
  EXPECT_TRUE(ids->return_token_ids);
  EXPECT_TRUE(ids->gen.return_prompt_ids) << "the engine is asked for the prompt's ids";
  EXPECT_EQ(ids->return_tokens_as_token_ids, std::optional<bool>(false)) << "given: the server's default does not apply";
  EXPECT_FALSE(r->return_tokens_as_token_ids.has_value());
  EXPECT_EQ(ids->gen.cache_salt, "tenant-7");
  EXPECT_EQ(r->gen.cache_salt, "");
  EXPECT_EQ(parse(R"({"prompt": "x", "truncate_prompt_tokens": -1})")->gen.truncate_prompt_tokens, -1)
      << "the model's context: route() resolves it";
  for (const auto& [body, says] : std::vector<std::pair<std::string, std::string>>{
           {R"({"prompt": "x", "allowed_token_ids": []})", "allowed_token_ids"},
           {R"({"prompt": "x", "allowed_token_ids": [1.5]})", "allowed_token_ids[]"},
           {R"({"prompt": "x", "allowed_token_ids": [-1]})", "no token id"},
           {R"({"prompt": "x", "truncate_prompt_tokens": 0})", "truncate_prompt_tokens"},
           {R"({"prompt": "x", "truncate_prompt_tokens": -2})", "truncate_prompt_tokens"},
           {R"({"prompt": "x", "priority": "high"})", "priority"},
           {R"({"prompt": "x", "include_stop_str_in_output": 1})", "include_stop_str_in_output"},
           {R"({"prompt": "x", "bad_words": "Paris"})", "'bad_words' must be an array of strings"},
           {R"({"prompt": "x", "bad_words": [3]})", "bad_words[]"},
           {R"({"prompt": "x", "return_token_ids": "yes"})", "return_token_ids"},
           {R"({"prompt": "x", "return_tokens_as_token_ids": 1})", "return_tokens_as_token_ids"},
           {R"({"prompt": "x", "cache_salt": ""})", "'cache_salt' must be a non-empty string"},
           {R"({"prompt": "x", "cache_salt": 42})", "'cache_salt' must be a non-empty string"}}) {
    auto bad = parse(body);
    ASSERT_FALSE(bad.has_value()) << body;
    EXPECT_EQ(bad.status().code(), StatusCode::invalid_argument) << body;
    EXPECT_NE(bad.status().message().find(says), std::string::npos) << body << " -> " << bad.status().message();
  }
}

TEST(OpenaiParse, BeamSearchFields) {
  auto r = parse(R"({"prompt":["a","b"],"n":3,"max_tokens":9,"use_beam_search":true,"length_penalty":0.5,
                     "early_stopping":"never","stop_token_ids":[7],"ignore_eos":true,"logprobs":2,
                     "temperature":0.3,"cache_salt":"s","priority":-2})");
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_TRUE(r->use_beam_search);
  EXPECT_EQ(r->n_choices(), 6);
  const BeamSearchOptions b = r->beam_request(1);
  EXPECT_EQ(b.prompt, "b");
  EXPECT_EQ(b.beam_width, 3);
  EXPECT_EQ(b.max_tokens, 9);
  EXPECT_FLOAT_EQ(b.length_penalty, 0.5f);
  EXPECT_EQ(b.early_stopping, EarlyStopping::never);
  EXPECT_EQ(b.stop_ids, std::vector<int32_t>{7});
  EXPECT_TRUE(b.ignore_eos);
  EXPECT_EQ(b.logprobs, 2);
  EXPECT_EQ(b.cache_salt, "s");
  EXPECT_EQ(b.priority, 2);  // vLLM's lower-first, negated
  for (const char* early : {R"(true)", R"(false)"}) {
    auto e = parse(std::string(R"({"prompt":"a","use_beam_search":true,"early_stopping":)") + early + "}");
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->early_stopping, std::string(early) == "true" ? EarlyStopping::on : EarlyStopping::heuristic);
  }
  // Without use_beam_search the fields are read and nothing else changes.
  auto plain = parse(R"({"prompt":"a","length_penalty":2,"stop":["x"]})");
  ASSERT_TRUE(plain.has_value());
  EXPECT_FALSE(plain->use_beam_search);
  for (const char* bad : {R"("early_stopping":"maybe")", R"("early_stopping":1)", R"("length_penalty":"x")",
                          R"("stop":["."])", R"("logit_bias":{"3":1})", R"("allowed_token_ids":[3])",
                          R"("bad_words":["x"])", R"("min_tokens":1)", R"("repetition_penalty":1.1)",
                          R"("presence_penalty":0.5)", R"("response_format":{"type":"json_object"})",
                          R"("prompt_logprobs":1)", R"("echo":true,"logprobs":1)", R"("max_tokens":0)"}) {
    auto e = parse(std::string(R"({"prompt":"a","use_beam_search":true,)") + bad + "}");
    ASSERT_FALSE(e.has_value()) << bad;
    EXPECT_EQ(e.status().code(), StatusCode::invalid_argument) << bad;
  }
  auto image = parse(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]}],
                        "use_beam_search":true})",
                     Endpoint::chat);
  ASSERT_FALSE(image.has_value());
  EXPECT_EQ(image.status().code(), StatusCode::unsupported);
}

// vLLM's video parts (GLM-4.1V and Qwen2-VL take video there) are refused by name: brigade runs images only.
TEST(OpenaiParse, VideoPartsAreRefusedByName) {
  for (const char* part : {R"({"type":"video_url","video_url":{"url":"data:video/mp4;base64,AA=="}})",
                           R"({"type":"video","video":"clip.mp4"})"}) {
    auto e = parse(std::string(R"({"messages":[{"role":"user","content":[)") + part + "]}]}", Endpoint::chat);
    ASSERT_FALSE(e.has_value()) << part;
    EXPECT_EQ(e.status().code(), StatusCode::invalid_argument);
    EXPECT_NE(e.status().message().find("video parts are not supported"), std::string::npos) << e.status().to_string();
  }
}

TEST(OpenaiParse, TokenizeAndDetokenizeBodies) {
  auto t = parse_tokenize_body(R"({"prompt": "hi", "add_special_tokens": false})");
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  EXPECT_EQ(t->prompt, "hi");
  EXPECT_FALSE(t->add_special_tokens);
  EXPECT_TRUE(parse_tokenize_body(R"({"prompt": "hi"})")->add_special_tokens);
  auto d = parse_detokenize_body(R"({"tokens": [0, 5, 2147483647]})");
  ASSERT_TRUE(d.has_value()) << d.status().to_string();
  EXPECT_EQ(*d, (std::vector<int32_t>{0, 5, 2147483647}));
  for (const char* bad : {"{", "[]", "{}", R"({"prompt": 3})", R"({"prompt": "a", "add_special_tokens": 1})"})
    EXPECT_EQ(parse_tokenize_body(bad).status().code(), StatusCode::invalid_argument) << bad;
  // vLLM's chat form: messages as a chat completion takes them, special tokens off by default.
  auto chat = parse_tokenize_body(R"({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": false,
    "chat_template_kwargs": {"enable_thinking": false}})");
  ASSERT_TRUE(chat.has_value()) << chat.status().to_string();
  ASSERT_TRUE(chat->chat.has_value());
  EXPECT_EQ(chat->chat->messages.size(), 1u);
  EXPECT_EQ(chat->chat->chat_ending, Engine::ChatEnding::none);
  EXPECT_EQ(chat->chat->chat_template_kwargs, R"({"enable_thinking":false})");
  EXPECT_FALSE(chat->add_special_tokens);
  EXPECT_TRUE(parse_tokenize_body(R"({"messages": [{"role": "user", "content": "hi"}], "add_special_tokens": true})")
                  ->add_special_tokens);
  EXPECT_FALSE(t->chat.has_value());
  for (const char* bad : {R"({"messages": "hi"})", R"({"messages": [{"role": "user", "content": "x"}], "prompt": "x"})",
                          R"({"messages": [{"role": "user", "content": "x"}], "tools": 3})"})
    EXPECT_EQ(parse_tokenize_body(bad).status().code(), StatusCode::invalid_argument) << bad;
  auto image = parse_tokenize_body(R"({"messages": [{"role": "user", "content": [{"type": "image_url",
    "image_url": {"url": "data:image/png;base64,AAAA"}}]}]})");
  ASSERT_FALSE(image.has_value());
  EXPECT_NE(image.status().message().find("images"), std::string::npos) << image.status().message();
  for (const char* bad : {"{}", R"({"tokens": "1 2"})", R"({"tokens": [1, -2]})", R"({"tokens": [2147483648]})",
                          R"({"tokens": [1.5]})", R"({"tokens": [18446744073709551615]})"})
    EXPECT_EQ(parse_detokenize_body(bad).status().code(), StatusCode::invalid_argument) << bad;
}

TEST(OpenaiParse, FuzzRandomAndMutatedBodies) {
  std::mt19937_64 rng(12345);
  int n_ok = 0, n_err = 0;
  for (int i = 0; i < 4000; ++i) {
    const json body = random_body(rng);
    for (Endpoint ep : {Endpoint::completions, Endpoint::chat}) {
      auto r = parse_completion_request(body, ep);
      if (r) {
        ++n_ok;
        check_accepted(*r);
      } else {
        ++n_err;
        EXPECT_NE(r.status().code(), StatusCode::ok);
      }
    }
    // Byte-level mutations of the serialized body: flips, truncations, insertions.
    std::string text = body.dump(-1, ' ', false, json::error_handler_t::replace);
    for (int m = 0; m < 3 && !text.empty(); ++m) {
      const size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0: text[at] = static_cast<char>(rng() % 256); break;
        case 1: text.resize(at); break;
        default: text.insert(at, 1, "{}[]\",:0-e\\"[rng() % 11]); break;
      }
      auto r = parse_completion_body(text, Endpoint::completions);
      if (r) check_accepted(*r);
      // /tokenize and /detokenize bodies: an answer (value or error), never a crash.
      auto t = parse_tokenize_body(text);
      if (!t) {
        EXPECT_NE(t.status().code(), StatusCode::ok);
      }
      auto d = parse_detokenize_body(text);
      if (d) {
        for (int32_t id : *d) EXPECT_GE(id, 0);
      }
    }
  }
  // Both outcomes must occur, or the generator is not exercising the parser.
  EXPECT_GT(n_ok, 100);
  EXPECT_GT(n_err, 100);
}

}  // namespace
}  // namespace brigade::server
