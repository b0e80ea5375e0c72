// Embedding requests (Engine::submit_embed / embed) through the whole engine, against
// transformers: AutoModel's last_hidden_state of the committed qwen3 fixture pooled last / mean /
// cls (tests/fixtures/qwen3/embeddings.json, scripts/make_fixtures.py --embeddings). On the host
// and device paths, under tensor parallelism and PD separation, in chunks of 4 and 16 tokens,
// with a radix-cache hit, beside generation requests in the same steps, and the errors a client
// can cause.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "brigade/engine.h"
#include "models/mapped_file.h"
#include "tests/engine_test_util.h"
#include "tests/models/hf_fixture.h"

namespace brigade {
namespace {

// fp32 both sides; the hidden states are O(1) (a final RMSNorm's output).
constexpr float kTol = 1e-4f;

struct EmbedCase {
  std::vector<int32_t> prompt;
  std::map<std::string, std::vector<float>> raw, normalized;  // by pooling name
};

std::vector<EmbedCase> read_cases() {
  auto text = read_text_file(testing::fixture_dir("qwen3") + "/embeddings.json");
  EXPECT_TRUE(text.has_value()) << text.status().to_string();
  if (!text) return {};
  std::vector<EmbedCase> out;
  const nlohmann::json doc = nlohmann::json::parse(*text);
  for (const auto& c : doc.at("cases")) {
    EmbedCase e;
    e.prompt = c.at("prompt").get<std::vector<int32_t>>();
    for (const auto& [k, v] : c.at("raw").items()) e.raw[k] = v.get<std::vector<float>>();
    for (const auto& [k, v] : c.at("normalized").items()) e.normalized[k] = v.get<std::vector<float>>();
    out.push_back(std::move(e));
  }
  return out;
}

EngineOptions options(Pooling pooling, int step_tokens = 16) {
  EngineOptions o = testing::test_engine_options(testing::fixture_dir("qwen3"), 1);
  auto& inst = o.topology.instances.front();
  inst.kv.memory_mb = 8;
  inst.kv.page_size = 8;
  inst.scheduler.max_step_tokens = step_tokens;  // the 40-token prompt takes several chunks
  o.pooling = pooling;
  return o;
}

EmbedOptions ids(const std::vector<int32_t>& prompt, std::optional<bool> normalize = std::nullopt, int dims = 0) {
  EmbedOptions e;
  e.prompt_ids = prompt;
  e.normalize = normalize;
  e.dimensions = dims;
  return e;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, float tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], want[k], tol) << what << " [" << k << "]";
}

// Every case alone, then all of them submitted together (sharing steps), raw and normalized.
void expect_transformers(const EngineOptions& o, const std::string& mode, const std::string& what) {
  auto engine = testing::create_engine(o);
  ASSERT_TRUE(engine);
  const auto cases = read_cases();
  ASSERT_EQ(cases.size(), 4u);
  for (const EmbedCase& c : cases) {
    const std::string at = what + " " + mode + " prompt of " + std::to_string(c.prompt.size());
    auto raw = engine->embed(ids(c.prompt, false));
    ASSERT_TRUE(raw.has_value()) << at << ": " << raw.status().to_string();
    expect_near(raw->values, c.raw.at(mode), kTol, at + " raw");
    EXPECT_EQ(raw->prompt_tokens, static_cast<int>(c.prompt.size())) << at;
    auto unit = engine->embed(ids(c.prompt));  // the engine's default: normalized
    ASSERT_TRUE(unit.has_value()) << at << ": " << unit.status().to_string();
    expect_near(unit->values, c.normalized.at(mode), kTol, at + " normalized");
  }
  std::vector<std::promise<Expected<Embedding>>> done(cases.size());
  for (size_t i = 0; i < cases.size(); ++i)
    ASSERT_TRUE(engine->submit_embed(ids(cases[i].prompt), [&done, i](Expected<Embedding> e) { done[i].set_value(std::move(e)); }));
  for (size_t i = 0; i < cases.size(); ++i) {
    auto e = done[i].get_future().get();
    ASSERT_TRUE(e.has_value()) << e.status().to_string();
    expect_near(e->values, cases[i].normalized.at(mode), kTol, what + " " + mode + " together, case " + std::to_string(i));
  }
  const EngineStats st = engine->stats();
  EXPECT_EQ(st.generated_tokens, 0u) << "an embedding request samples nothing";
  EXPECT_EQ(st.n_running, 0);
  EXPECT_EQ(st.kv_pages_used, st.cache_pages) << "every request gave its pages back (the cache keeps whole ones)";
}

TEST(Embeddings, EqualTransformersPooledHiddenStatesOnTheHostPath) {
  for (auto [mode, p] : {std::pair{"last", Pooling::last}, {"mean", Pooling::mean}, {"cls", Pooling::cls}})
    expect_transformers(options(p), mode, "host");
}

TEST(Embeddings, EqualTransformersOnTheDevicePathWithTwoStepsInFlight) {
  for (auto [mode, p] : {std::pair{"last", Pooling::last}, {"mean", Pooling::mean}}) {
    EngineOptions o = options(p);
    o.topology.instances.front().executors.front().step_path = "device";
    o.topology.instances.front().scheduler.max_inflight_steps = 2;
    expect_transformers(o, mode, "device");
  }
}

// Tensor parallelism: rank 0 gathers the rows (every rank holds the whole residual), followers
// run the chunks as ever.
TEST(Embeddings, UnderTensorParallelismRankZeroPools) {
  for (auto [mode, p] : {std::pair{"mean", Pooling::mean}, {"cls", Pooling::cls}}) {
    EngineOptions o = options(p);
    o.topology.instances.front().executors.front().tp = 2;
    expect_transformers(o, mode, "tp 2");
  }
}

// PD separation: the prefill instance runs the prompt and answers; nothing is handed off.
TEST(Embeddings, ThePrefillInstanceOfPdSeparationPools) {
  const EngineOptions o = testing::prefill_decode(options(Pooling::last));
  expect_transformers(o, "last", "pd");
}

// Chunks of 4 tokens (mean sums ten chunks' rows) against the whole 40-token prompt in one step.
TEST(Embeddings, ChunkedPrefillEqualsOneChunk) {
  const EmbedCase c = read_cases().at(2);
  ASSERT_EQ(c.prompt.size(), 40u);
  for (Pooling p : {Pooling::last, Pooling::mean, Pooling::cls}) {
    auto whole = testing::create_engine(options(p, 512));
    auto chunked = testing::create_engine(options(p, 4));
    ASSERT_TRUE(whole && chunked);
    auto a = whole->embed(ids(c.prompt, false)), b = chunked->embed(ids(c.prompt, false));
    ASSERT_TRUE(a.has_value() && b.has_value());
    expect_near(b->values, a->values, 1e-5f, std::string("chunked ") + pooling_name(p));
  }
}

// The second request finds the prompt's pages in the radix cache and (at least one token being
// computed) may take all of its 40 tokens but the last: 4 whole pages and 7 rows of the fifth
// (cache.partial_pages): last pooling computes only the last token; mean and cls take no hit.
// Equal either way.
TEST(Embeddings, ARadixCacheHitGivesTheSameEmbedding) {
  const EmbedCase c = read_cases().at(2);
  for (Pooling p : {Pooling::last, Pooling::mean, Pooling::cls}) {
    const std::string mode = pooling_name(p);
    auto engine = testing::create_engine(options(p));
    ASSERT_TRUE(engine);
    auto first = engine->embed(ids(c.prompt, false));
    ASSERT_TRUE(first.has_value()) << first.status().to_string();
    ASSERT_GE(*engine->cached_prefix_tokens(c.prompt), 32) << mode << ": the embedding's pages entered the cache";
    const uint64_t hits = engine->stats().cache_hit_tokens;
    auto second = engine->embed(ids(c.prompt, false));
    ASSERT_TRUE(second.has_value()) << second.status().to_string();
    EXPECT_EQ(engine->stats().cache_hit_tokens - hits, p == Pooling::last ? 39u : 0u) << mode;
    expect_near(second->values, c.raw.at(mode), kTol, mode + " after a cache hit");
    expect_near(second->values, first->values, 1e-5f, mode + " cached against computed");
  }
}

// Generation requests decode while embedding prompts prefill in the same steps: the tokens are
// those of the generation alone, and the embeddings those of transformers.
TEST(Embeddings, ShareStepsWithGenerationRequestsChangingNeither) {
  const auto cases = read_cases();
  auto engine = testing::create_engine(options(Pooling::mean, 24));
  ASSERT_TRUE(engine);
  const GenerateOptions gen = testing::greedy_ids(cases[0].prompt, 24);
  auto alone = engine->generate(gen);
  ASSERT_TRUE(alone.has_value()) << alone.status().to_string();
  const uint64_t steps_before = engine->stats().steps;
  std::promise<Expected<Completion>> generated;
  std::thread g([&] { generated.set_value(engine->generate(gen)); });
  std::vector<Expected<Embedding>> embedded;
  for (int round = 0; round < 3; ++round)
    for (const EmbedCase& c : cases) embedded.push_back(engine->embed(ids(c.prompt)));
  g.join();
  auto together = generated.get_future().get();
  ASSERT_TRUE(together.has_value()) << together.status().to_string();
  EXPECT_EQ(together->token_ids, alone->token_ids);
  for (size_t i = 0; i < embedded.size(); ++i) {
    ASSERT_TRUE(embedded[i].has_value()) << embedded[i].status().to_string();
    expect_near(embedded[i]->values, cases[i % cases.size()].normalized.at("mean"), kTol, "beside generation");
  }
  EXPECT_GT(engine->stats().steps, steps_before);
}

// Matryoshka: the first `dimensions` values of the raw embedding, normalized again.
TEST(Embeddings, DimensionsTruncateThenNormalize) {
  const EmbedCase c = read_cases().at(0);
  auto engine = testing::create_engine(options(Pooling::last));
  ASSERT_TRUE(engine);
  auto e = engine->embed(ids(c.prompt, std::nullopt, 16));
  ASSERT_TRUE(e.has_value()) << e.status().to_string();
  std::vector<float> want(c.raw.at("last").begin(), c.raw.at("last").begin() + 16);
  double norm = 0;
  for (float v : want) norm += static_cast<double>(v) * v;
  for (float& v : want) v = static_cast<float>(v / std::sqrt(norm));
  expect_near(e->values, want, kTol, "dimensions 16");
}

TEST(Embeddings, BadInputsSayWhatWasWrong) {
  auto engine = testing::create_engine(options(Pooling::last));
  ASSERT_TRUE(engine);
  EXPECT_EQ(engine->model().hidden_size, 64);
  auto empty = engine->submit_embed(EmbedOptions{}, [](Expected<Embedding>) {});
  ASSERT_FALSE(empty.has_value());
  EXPECT_NE(empty.status().message().find("empty"), std::string::npos) << empty.status().message();
  auto outside = engine->embed(ids({1, 999}));
  ASSERT_FALSE(outside.has_value());
  EXPECT_NE(outside.status().message().find("999"), std::string::npos) << outside.status().message();
  auto dims = engine->embed(ids({1, 2}, std::nullopt, 65));
  ASSERT_FALSE(dims.has_value());
  EXPECT_NE(dims.status().message().find("dimensions"), std::string::npos) << dims.status().message();
  // The fixture's context is 256 tokens: a whole context embeds, one token more does not.
  std::vector<int32_t> full(256, 7);
  auto fits = engine->embed(ids(full));
  EXPECT_TRUE(fits.has_value()) << fits.status().to_string();
  full.push_back(7);
  auto too_long = engine->embed(ids(full));
  ASSERT_FALSE(too_long.has_value());
  EXPECT_EQ(too_long.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(too_long.status().message().find("257"), std::string::npos) << too_long.status().message();
  auto text = engine->embed(EmbedOptions{.prompt = "no tokenizer here"});
  ASSERT_FALSE(text.has_value());
  EXPECT_NE(text.status().message().find("tokenizer"), std::string::npos) << text.status().message();
}

}  // namespace
}  // namespace brigade
