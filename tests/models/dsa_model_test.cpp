// DeepSeek Sparse Attention (models/dsa_indexer.h): DeepSeek-V3.2 (deepseek_v32) and GLM-5
// (glm_moe_dsa) from safetensors against transformers' DeepseekV32ForCausalLM /
// GlmMoeDsaForCausalLM (tests/fixtures/deepseek_v32, glm_moe_dsa by scripts/make_fixtures.py,
// index_topk 5 and 6, below most prompt positions, so each query attends to its indexer's choice
// only; GLM-5's layer 1 reuses layer 0's choice). hf_fixture_test.cpp checks one prefill and the
// greedy tokens; here: every cached decode step, a prefill continued by decode steps and by
// chunks over the cached prefix (the index keys must survive in the cache), pages moved through
// read_page / write_page (what the host and disk tiers do), two sequences in one step, that dense
// attention gives other logits (transformers' dense run of the same weights, recorded by the
// generator, is what brigade gives with the indexer keeping every key), the config and refusals.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "cpu/cpu_backend.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/deepseek.h"
#include "models/model_config.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::kLogitTol;
using testing::load_or_fail;
using testing::make_step;
using testing::max_diff_with_rules;
using testing::read_fixture_cases;
using testing::run_step;

constexpr int kPageSize = 4, kPagesPerSeq = 16;

// Max |Δ| of a step's logit rows [0, n) (from row `from` of `logits`) against the reference rows
// [at, at + n).
float rows_diff(const std::vector<float>& logits, const std::vector<std::vector<float>>& want, size_t at, size_t n,
                int vocab, size_t from = 0) {
  float d = 0.0f;
  for (size_t r = 0; r < n; ++r)
    for (size_t v = 0; v < static_cast<size_t>(vocab); ++v)
      d = std::max(d, std::fabs(logits[(from + r) * static_cast<size_t>(vocab) + v] - want[at + r][v]));
  return d;
}

std::vector<int32_t> slice(const std::vector<int32_t>& v, size_t from, size_t to) {
  return {v.begin() + static_cast<std::ptrdiff_t>(from), v.begin() + static_cast<std::ptrdiff_t>(to)};
}

nlohmann::json fixture_json(const std::string& name, const char* file = "config.json") {
  auto text = read_text_file(fixture_dir(name) + "/" + file);
  EXPECT_TRUE(text.has_value());
  return text ? nlohmann::json::parse(*text) : nlohmann::json::object();
}

// One fixture's model on the CPU, its cases, and steps over pools of pages of kPageSize.
class Dsa : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend_ = make_cpu_backend({.n_threads = 2});
    model_ = load_or_fail(fixture_dir(GetParam()), *backend_);
    ASSERT_NE(model_, nullptr);
    cases_ = read_fixture_cases(GetParam());
    ASSERT_EQ(cases_.size(), 3u);
    vocab_ = model_->config().vocab_size;
  }
  // A pool for `n_seqs` sequences of kPagesPerSeq pages.
  Expected<KvCache> pool(int n_seqs) {
    return KvCache::allocate(*backend_, model_->kv_layout(n_seqs * kPagesPerSeq, kPageSize, DType::f32));
  }
  std::vector<float> step(const KvCache& kv, const std::vector<testing::SeqChunk>& chunks) {
    return run_step(*model_, *backend_, kv, make_step(chunks, kPageSize, kPagesPerSeq));
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::vector<testing::FixtureCase> cases_;
  int vocab_ = 0;
};

// Every cached decode step (fed transformers' greedy tokens) against transformers' cached decode.
TEST_P(Dsa, DecodeStepsMatchTransformers) {
  for (const auto& fc : cases_) {
    const float worst = testing::decode_max_diff(*model_, *backend_, fc);
    EXPECT_LE(worst, kLogitTol) << "prompt of " << fc.prompt.size() << " tokens";
    RecordProperty("decode_max_abs_diff_" + std::to_string(fc.prompt.size()), std::to_string(worst));
  }
}

// The longest prompt's first 9 tokens as a prefill, then the rest one decode step each, and again
// (sequence 1) in chunks of 6 over the cached prefix: every row's logits are transformers' of one
// prefill of the whole prompt (the choices read the index keys earlier steps cached).
TEST_P(Dsa, PrefillThenDecodeAndChunksEqualOnePrefill) {
  const auto& fc = cases_.back();
  const size_t n = fc.prompt.size(), first = 9;
  auto kv = pool(2);
  ASSERT_TRUE(kv.has_value());
  auto logits = step(*kv, {{0, slice(fc.prompt, 0, first), 0, true}});
  float decode = rows_diff(logits, fc.logits, 0, first, vocab_);
  for (size_t p = first; p < n; ++p) {
    logits = step(*kv, {{0, {fc.prompt[p]}, static_cast<int>(p), false}});
    decode = std::max(decode, rows_diff(logits, fc.logits, p, 1, vocab_));
  }
  EXPECT_LE(decode, kLogitTol);
  float chunked = 0.0f;
  for (size_t at = 0; at < n; at += 6) {
    const size_t end = std::min(n, at + 6);
    logits = step(*kv, {{1, slice(fc.prompt, at, end), static_cast<int>(at), true}});
    chunked = std::max(chunked, rows_diff(logits, fc.logits, at, end - at, vocab_));
  }
  EXPECT_LE(chunked, kLogitTol);
  RecordProperty("decode_after_prefill_max_abs_diff", std::to_string(decode));
  RecordProperty("chunked_max_abs_diff", std::to_string(chunked));
}

// A prefix cached by sequence 0 given to sequence 1 as the prefix cache and tiers do: its whole
// pages read out (read_page: the host tier's copy) and written into sequence 1's (write_page),
// the rows of the page it ends inside copied (copy_rows: a radix match ending mid-page); then
// sequence 1 continues from there: its rows are transformers' of one prefill, so the index keys
// travel with the page bytes.
TEST_P(Dsa, IndexKeysTravelWithThePages) {
  const auto& fc = cases_.back();
  const int whole = 5, prefix = whole * kPageSize + 2;
  auto kv = pool(2);
  ASSERT_TRUE(kv.has_value());
  EXPECT_GT(kv->layout().n_layers, model_->config().n_layers) << "the index keys' layers";
  step(*kv, {{0, slice(fc.prompt, 0, prefix), 0, false}});
  std::vector<std::byte> page(kv->layout().page_bytes());
  for (int p = 0; p < whole; ++p) {
    ASSERT_TRUE(kv->read_page(*backend_, p, page).is_ok());
    ASSERT_TRUE(kv->write_page(*backend_, kPagesPerSeq + p, page).is_ok());
  }
  ASSERT_TRUE(kv->copy_rows(*backend_, whole, kPagesPerSeq + whole, prefix - whole * kPageSize).is_ok());
  const auto logits = step(*kv, {{1, slice(fc.prompt, prefix, fc.prompt.size()), prefix, true}});
  EXPECT_LE(rows_diff(logits, fc.logits, prefix, fc.prompt.size() - prefix, vocab_), kLogitTol);
}

// A decode of one sequence and the prefill of another in one step: each its own choices.
TEST_P(Dsa, MixedStepKeepsSequencesApart) {
  const auto& a = cases_.front();
  const auto& b = cases_.back();
  auto kv = pool(2);
  ASSERT_TRUE(kv.has_value());
  step(*kv, {{0, a.prompt, 0, false}});
  const auto logits = step(*kv, {{0, {a.greedy[0]}, static_cast<int>(a.prompt.size()), false}, {1, b.prompt, 0, true}});
  EXPECT_LE(rows_diff(logits, a.decode_logits, 0, 1, vocab_), kLogitTol);
  EXPECT_LE(rows_diff(logits, b.logits, 0, b.prompt.size(), vocab_, 1), kLogitTol);
}

// With index_topk at max_position every query keeps every key: brigade then gives transformers'
// dense logits (the generator's dense_logits, the same weights with each indexer keeping all), and
// those are far from the sparse ones, so the fixtures check the indexer's choice.
TEST_P(Dsa, DenseAttentionGivesOtherLogits) {
  const auto expected = fixture_json(GetParam(), "expected.json");
  ASSERT_TRUE(expected.contains("dense_logits"));
  const auto dense = expected["dense_logits"].get<std::vector<std::vector<float>>>();
  const auto& fc = cases_.back();
  ASSERT_EQ(dense.size(), fc.prompt.size());
  auto ck = Checkpoint::open(fixture_dir(GetParam()));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  ModelConfig c = (*ck)->config();
  c.dsa.topk = c.max_position;  // every key of any context
  auto edited = Checkpoint::from_memory((*ck)->path(), c, (*ck)->tensors());
  auto dense_model = load_deepseek(*edited, *backend_, testing::test_load_options());
  ASSERT_TRUE(dense_model.has_value()) << dense_model.status().to_string();
  model_ = std::move(*dense_model);
  auto kv = pool(1);
  ASSERT_TRUE(kv.has_value());
  const auto logits = step(*kv, {{0, fc.prompt, 0, true}});
  const float to_dense = rows_diff(logits, dense, 0, dense.size(), vocab_);
  const float to_sparse = rows_diff(logits, fc.logits, 0, fc.logits.size(), vocab_);
  EXPECT_LE(to_dense, kLogitTol);
  EXPECT_GT(to_sparse, 100 * kLogitTol);
  RecordProperty("dense_max_abs_diff", std::to_string(to_dense));
  RecordProperty("dense_vs_sparse", std::to_string(to_sparse));
}

// The indexer's RoPE layout (halves for V3.2, pairs for GLM-5) moves the choice and so the logits.
TEST_P(Dsa, IndexerRopeStyleMatters) {
  EXPECT_GT(max_diff_with_rules(GetParam(),
                                [](ModelConfig& c) {
                                  c.dsa.rope_style = c.dsa.rope_style == RopeStyle::neox ? RopeStyle::interleaved : RopeStyle::neox;
                                }),
            100 * kLogitTol);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Dsa, ::testing::Values("deepseek_v32", "glm_moe_dsa"));

// Model::step_cost with the indexer: once a query sees more than index_topk keys, a longer
// context adds only the indexer's work (its 2 H (D + 1) flops per scored key, the D-wide key of
// every context row in each full layer), not attention over the extra latent rows.
TEST_P(Dsa, StepCostPastTopkGrowsByTheIndexerOnly) {
  const ModelConfig& c = model_->config();
  const KvLayout layout = model_->kv_layout(4, kPageSize, DType::f32);
  const double per_token = static_cast<double>(layout.page_bytes()) / kPageSize;
  const double key = per_token / layout.n_layers / layout.head_dim * c.dsa.head_dim;
  const double n_full = static_cast<double>(std::count(c.dsa.shared.begin(), c.dsa.shared.end(), false));
  ASSERT_GT(n_full, 0);
  auto decode_at = [&](int past) { return model_->step_cost(make_step({{0, {5}, past, false}}, kPageSize, kPagesPerSeq), per_token); };
  const int near = c.dsa.topk + 10, far = c.dsa.topk + 30;
  const StepCost a = decode_at(near), b = decode_at(far);
  EXPECT_DOUBLE_EQ(b.flops - a.flops, n_full * 2.0 * c.dsa.n_heads * (c.dsa.head_dim + 1) * (far - near));
  EXPECT_DOUBLE_EQ(b.bytes - a.bytes, key * n_full * (far - near));
  // Within the first topk keys, every key is attended: each one more costs the attention's pair
  // and latent row in every layer on top of the indexer's.
  const StepCost s0 = decode_at(0), s1 = decode_at(1);
  EXPECT_GT(s1.flops - s0.flops, n_full * 2.0 * c.dsa.n_heads * (c.dsa.head_dim + 1));
  EXPECT_DOUBLE_EQ(s1.bytes - s0.bytes, per_token / layout.n_layers * c.n_layers + key * n_full);
}

TEST(DsaConfig, ReadsTheIndexer) {
  auto v32 = parse_hf_config(fixture_json("deepseek_v32").dump());
  ASSERT_TRUE(v32.has_value()) << v32.status().to_string();
  EXPECT_EQ(v32->arch, "deepseek_v32");
  EXPECT_EQ(v32->dsa.n_heads, 8);
  EXPECT_EQ(v32->dsa.head_dim, 64);
  EXPECT_EQ(v32->dsa.topk, 5);
  EXPECT_EQ(v32->dsa.rope_style, RopeStyle::neox);
  EXPECT_EQ(v32->rope_style, RopeStyle::interleaved) << "the MLA part always rotates pairs";
  EXPECT_EQ(v32->dsa.shared, std::vector<bool>(2, false));
  auto glm = parse_hf_config(fixture_json("glm_moe_dsa").dump());
  ASSERT_TRUE(glm.has_value()) << glm.status().to_string();
  EXPECT_EQ(glm->dsa.rope_style, RopeStyle::interleaved);
  EXPECT_EQ(glm->dsa.shared, (std::vector<bool>{false, true, false}));
  EXPECT_FLOAT_EQ(glm->rms_eps, 1e-5f);
  // GlmMoeDsaConfig's schedule without indexer_types: the pattern, or freq / offset.
  nlohmann::json j = fixture_json("glm_moe_dsa");
  j.erase("indexer_types");
  j["index_topk_pattern"] = "FSS";
  auto pattern = parse_hf_config(j.dump());
  ASSERT_TRUE(pattern.has_value()) << pattern.status().to_string();
  EXPECT_EQ(pattern->dsa.shared, (std::vector<bool>{false, true, true}));
  j.erase("index_topk_pattern");
  j["index_topk_freq"] = 2;
  j["index_skip_topk_offset"] = 1;
  auto freq = parse_hf_config(j.dump());
  ASSERT_TRUE(freq.has_value()) << freq.status().to_string();
  EXPECT_EQ(freq->dsa.shared, (std::vector<bool>{false, true, false})) << "max(l - offset + 1, 0) % freq";
  // DeepSeek-V3.2's defaults where config.json leaves them out.
  nlohmann::json bare = fixture_json("deepseek_v32");
  for (const char* k : {"index_n_heads", "index_head_dim", "index_topk", "kv_lora_rank"}) bare.erase(k);
  auto defaults = parse_hf_config(bare.dump());
  ASSERT_TRUE(defaults.has_value()) << defaults.status().to_string();
  EXPECT_EQ(defaults->dsa.n_heads, 64);
  EXPECT_EQ(defaults->dsa.head_dim, 128);
  EXPECT_EQ(defaults->dsa.topk, 2048);
}

// parse_hf_config's error for `j` has `code` and names `word`.
void expect_refused(const nlohmann::json& j, StatusCode code, const std::string& word) {
  const Status s = parse_hf_config(j.dump()).status();
  EXPECT_EQ(s.code(), code) << s.to_string();
  EXPECT_NE(s.message().find(word), std::string::npos) << s.message();
}

TEST(DsaConfig, RefusedByName) {
  nlohmann::json shared_first = fixture_json("glm_moe_dsa");
  shared_first["indexer_types"] = {"shared", "full", "full"};
  expect_refused(shared_first, StatusCode::invalid_argument, "indexer_types[0]");
  nlohmann::json bad_type = fixture_json("glm_moe_dsa");
  bad_type["indexer_types"] = {"full", "sparse", "full"};
  expect_refused(bad_type, StatusCode::corrupt, "indexer_types[1]");
  nlohmann::json wide = fixture_json("deepseek_v32");
  wide["index_head_dim"] = 128;  // wider than the latent row (64 + 8)
  expect_refused(wide, StatusCode::invalid_argument, "index_head_dim");
  nlohmann::json no_q_lora = fixture_json("deepseek_v32");
  no_q_lora["q_lora_rank"] = nullptr;
  expect_refused(no_q_lora, StatusCode::unsupported, "q_lora_rank");
  nlohmann::json no_topk = fixture_json("deepseek_v32");
  no_topk["index_topk"] = 0;
  expect_refused(no_topk, StatusCode::invalid_argument, "index_topk");
  nlohmann::json partial = fixture_json("glm_moe_dsa");
  partial["partial_rotary_factor"] = 0.5;
  expect_refused(partial, StatusCode::unsupported, "partial_rotary_factor");
}

}  // namespace
}  // namespace brigade
