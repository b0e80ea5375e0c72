// DeepSeek-V2/V3 beyond one prefill (hf_fixture_test.cpp covers that): every cached decode step's
// logits against transformers' (the absorbed decode over the latent cache, pages of 4 tokens so
// the context crosses pages), chunked prefill over the cached prefix against the full prefill,
// two sequences in one step, the latent KV layout, the routing and RoPE rules the fixtures pin
// (each changed in config.json moves the logits far past the tolerance), and what is refused.
#include <gtest/gtest.h>

#include <filesystem>

#include "cpu/cpu_backend.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/inspect.h"
#include "models/model_config.h"
#include "models/rope_scaling.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::kLogitTol;
using testing::load_or_fail;
using testing::make_step;
using testing::max_diff_with_config;
using testing::read_fixture_cases;
using testing::run_step;

constexpr int kPageSize = 4, kPagesPerSeq = 16;

float max_abs_diff(const float* got, const std::vector<float>& want) {
  float d = 0.0f;
  for (size_t i = 0; i < want.size(); ++i) d = std::max(d, std::fabs(got[i] - want[i]));
  return d;
}

class Deepseek : public ::testing::TestWithParam<std::string> {};

// Prefill, then one decode step per greedy token of transformers' (fed the same tokens), each
// step's logits against transformers' cached decode.
TEST_P(Deepseek, DecodeStepsMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_or_fail(fixture_dir(GetParam()), *backend);
  ASSERT_NE(model, nullptr);
  const int vocab = model->config().vocab_size;
  for (const auto& fc : read_fixture_cases(GetParam())) {
    ASSERT_EQ(fc.decode_logits.size(), fc.greedy.size() - 1);
    auto kv = KvCache::allocate(*backend, model->kv_layout(kPagesPerSeq, kPageSize, DType::f32));
    ASSERT_TRUE(kv.has_value());
    run_step(*model, *backend, *kv, make_step({{0, fc.prompt, 0, false}}, kPageSize, kPagesPerSeq));
    int n_past = static_cast<int>(fc.prompt.size());
    float worst = 0.0f;
    for (size_t i = 0; i < fc.decode_logits.size(); ++i, ++n_past) {
      const auto logits = run_step(*model, *backend, *kv, make_step({{0, {fc.greedy[i]}, n_past, false}}, kPageSize, kPagesPerSeq));
      worst = std::max(worst, max_abs_diff(logits.data(), fc.decode_logits[i]));
      EXPECT_EQ(testing::argmax(logits.data(), vocab), fc.greedy[i + 1]) << "step " << i;
    }
    EXPECT_LE(worst, kLogitTol) << "prompt of " << fc.prompt.size() << " tokens";
    RecordProperty("decode_max_abs_diff_" + std::to_string(fc.prompt.size()), std::to_string(worst));
  }
}

// The longest prompt in chunks of 6 tokens, each a step over the latent rows the earlier chunks
// cached (what chunked prefill and a radix-cache hit run): every row's logits as in one prefill.
TEST_P(Deepseek, ChunkedPrefillOverTheCachedPrefix) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_or_fail(fixture_dir(GetParam()), *backend);
  ASSERT_NE(model, nullptr);
  const auto fc = read_fixture_cases(GetParam()).back();
  const int vocab = model->config().vocab_size;
  auto kv = KvCache::allocate(*backend, model->kv_layout(kPagesPerSeq, kPageSize, DType::f32));
  ASSERT_TRUE(kv.has_value());
  float worst = 0.0f;
  for (size_t at = 0; at < fc.prompt.size(); at += 6) {
    const size_t end = std::min(fc.prompt.size(), at + 6);
    const std::vector<int32_t> chunk(fc.prompt.begin() + static_cast<std::ptrdiff_t>(at), fc.prompt.begin() + static_cast<std::ptrdiff_t>(end));
    const auto logits = run_step(*model, *backend, *kv, make_step({{0, chunk, static_cast<int>(at), true}}, kPageSize, kPagesPerSeq));
    for (size_t r = 0; r < chunk.size(); ++r)
      worst = std::max(worst, max_abs_diff(logits.data() + r * static_cast<size_t>(vocab), fc.logits[at + r]));
  }
  EXPECT_LE(worst, kLogitTol);
}

// A decode of one sequence and the prefill of another in one step give each its own logits.
TEST_P(Deepseek, MixedStepKeepsSequencesApart) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_or_fail(fixture_dir(GetParam()), *backend);
  ASSERT_NE(model, nullptr);
  const auto cases = read_fixture_cases(GetParam());
  const auto& a = cases.front();  // 7 tokens, then a decode
  const auto& b = cases.back();   // 40 tokens of prefill in the same step
  const int vocab = model->config().vocab_size;
  auto kv = KvCache::allocate(*backend, model->kv_layout(2 * kPagesPerSeq, kPageSize, DType::f32));
  ASSERT_TRUE(kv.has_value());
  run_step(*model, *backend, *kv, make_step({{0, a.prompt, 0, false}}, kPageSize, kPagesPerSeq));
  const int n_a = static_cast<int>(a.prompt.size());
  const auto logits = run_step(*model, *backend, *kv,
                               make_step({{0, {a.greedy[0]}, n_a, false}, {1, b.prompt, 0, false}}, kPageSize, kPagesPerSeq));
  EXPECT_LE(max_abs_diff(logits.data(), a.decode_logits[0]), kLogitTol);
  EXPECT_LE(max_abs_diff(logits.data() + vocab, b.logits.back()), kLogitTol);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Deepseek, ::testing::Values("deepseek_v3", "deepseek_v2", "deepseek_v3_step", "mistral4",
                                                                "glm4_moe_lite"));

// One latent row of kv_lora_rank + qk_rope_head_dim per token and layer, no V: the pool's bytes
// and the page fingerprint say so.
TEST(DeepseekConfig, LatentKvLayout) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load_or_fail(fixture_dir("deepseek_v3"), *backend);
  ASSERT_NE(model, nullptr);
  const KvLayout l = model->kv_layout(8, 16, DType::bf16);
  EXPECT_TRUE(l.latent);
  EXPECT_EQ(l.n_kv_heads, 1);
  EXPECT_EQ(l.head_dim, 32 + 8);
  EXPECT_EQ(l.page_bytes(), size_t{3} * 16 * 40 * 2) << "3 layers x 16 tokens x 40 values x bf16, no V";
  KvLayout kv_pair = l;
  kv_pair.latent = false;
  EXPECT_NE(kv_fingerprint("m", l), kv_fingerprint("m", kv_pair));
  auto kv = KvCache::allocate(*backend, l);
  ASSERT_TRUE(kv.has_value());
  EXPECT_TRUE(kv->layer(0).v.empty());
  // HiCache moves a page as its bytes: every layer's latent rows, read back as written.
  std::vector<std::byte> page(l.page_bytes()), back(l.page_bytes());
  for (size_t i = 0; i < page.size(); ++i) page[i] = static_cast<std::byte>(i * 7 + 1);
  ASSERT_TRUE(kv->write_page(*backend, 5, page).is_ok());
  ASSERT_TRUE(kv->read_page(*backend, 5, back).is_ok());
  EXPECT_EQ(back, page);
  EXPECT_FALSE(kv->read_page(*backend, 5, std::span<std::byte>(back.data(), back.size() - 1)).is_ok());
  KvLayout int8 = l;
  int8.dtype = DType::i8;
  EXPECT_EQ(KvCache::allocate(*backend, int8).status().code(), StatusCode::invalid_argument);
}

TEST(DeepseekConfig, FixtureFields) {
  auto v3 = Checkpoint::open(fixture_dir("deepseek_v3"));
  auto v2 = Checkpoint::open(fixture_dir("deepseek_v2"));
  ASSERT_TRUE(v3.has_value() && v2.has_value());
  const ModelConfig& c3 = (*v3)->config();
  EXPECT_EQ(c3.arch, "deepseek_v3");
  EXPECT_EQ(c3.q_lora_rank, 24);
  EXPECT_EQ(c3.moe_scoring, MoeScoring::sigmoid);
  EXPECT_EQ(c3.moe_group_score, MoeGroupScore::top2_sum);
  EXPECT_TRUE(c3.moe_score_bias);
  EXPECT_FALSE(c3.is_moe_layer(0));
  EXPECT_TRUE(c3.is_moe_layer(1));
  EXPECT_EQ(c3.rope_scaling.type, RopeScalingType::yarn);
  // 1/sqrt(16 + 8) * (0.1 * 0.7 * ln 4 + 1)^2
  EXPECT_NEAR(c3.attn_scale, 0.2041241f * std::pow(0.1f * 0.7f * std::log(4.0f) + 1.0f, 2.0f), 1e-6);
  const ModelConfig& c2 = (*v2)->config();
  EXPECT_EQ(c2.q_lora_rank, 0);
  EXPECT_EQ(c2.moe_scoring, MoeScoring::softmax);
  EXPECT_EQ(c2.moe_group_score, MoeGroupScore::max);
  EXPECT_FALSE(c2.moe_score_bias);
  EXPECT_EQ(c2.rope_style, RopeStyle::interleaved);
  auto info = inspect_model(fixture_dir("deepseek_v3"));
  ASSERT_TRUE(info.has_value());
  const std::string text = format_model_info(*info);
  EXPECT_NE(text.find("kv_lora_rank 32"), std::string::npos) << text;
  EXPECT_NE(text.find("groups 2 of 4 by top-2 sum"), std::string::npos) << text;
}

// Each rule the fixtures test, changed in config.json alone, moves the logits far past the
// tolerance: so a wrong implementation of it could not pass.
TEST(DeepseekConfig, RulesChangeTheResult) {
  const float far = 100 * kLogitTol;
  EXPECT_GT(max_diff_with_config("deepseek_v3", [](nlohmann::json& j) { j["routed_scaling_factor"] = 1.0; }), far);
  EXPECT_GT(max_diff_with_config("deepseek_v3", [](nlohmann::json& j) { j["topk_group"] = 4; }), far);
  EXPECT_GT(max_diff_with_config("deepseek_v3", [](nlohmann::json& j) { j["norm_topk_prob"] = false; }), far);
  EXPECT_GT(max_diff_with_config("deepseek_v3", [](nlohmann::json& j) { j["rope_interleave"] = false; }), far);
  EXPECT_GT(max_diff_with_config("deepseek_v3", [](nlohmann::json& j) { j["rope_parameters"].erase("mscale_all_dim"); }), far);
  EXPECT_GT(max_diff_with_config("deepseek_v2", [](nlohmann::json& j) { j["topk_method"] = "greedy"; }), far);
  EXPECT_GT(max_diff_with_config("deepseek_v2", [](nlohmann::json& j) { j["routed_scaling_factor"] = 1.0; }), far);
}

// Bad DeepSeek configs are refused with the field named.
TEST(DeepseekConfig, BadConfigsAreRefused) {
  auto text = read_text_file(fixture_dir("deepseek_v3") + "/config.json");
  ASSERT_TRUE(text.has_value());
  struct Bad {
    const char* key;
    nlohmann::json value;
    const char* names;
  };
  const Bad bad[] = {
      {"n_group", 3, "n_group"},
      {"topk_group", 5, "topk_group"},
      {"num_experts_per_tok", 5, "num_experts_per_tok"},  // 2 groups of 2 allow 4
      {"kv_lora_rank", 0, "kv_lora_rank"},
      {"first_k_dense_replace", 4, "first_k_dense_replace"},
      {"routed_scaling_factor", -1.0, "routed_scaling_factor"},
      {"moe_layer_freq", 2, "moe_layer_freq"},
      {"scoring_func", "softmax", "scoring_func"},
      {"topk_method", "greedy", "topk_method"},
      {"quantization_config", nlohmann::json{{"quant_method", "awq"}}, "quantization_config"},
      {"hidden_act", "gelu", "hidden_act"},
      {"attention_bias", true, "attention_bias"},
  };
  for (const Bad& b : bad) {
    auto j = nlohmann::json::parse(*text);
    j[b.key] = b.value;
    auto c = parse_hf_config(j.dump());
    ASSERT_FALSE(c.has_value()) << b.key;
    EXPECT_NE(c.status().message().find(b.names), std::string::npos) << c.status().to_string();
  }
  auto v2 = read_text_file(fixture_dir("deepseek_v2") + "/config.json");
  ASSERT_TRUE(v2.has_value());
  auto j = nlohmann::json::parse(*v2);
  j["norm_topk_prob"] = true;
  auto c = parse_hf_config(j.dump());
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.status().message().find("norm_topk_prob"), std::string::npos);
}

// The fixtures loaded as bf16 weights (the type DeepSeek checkpoints ship in; the per-head W_UK /
// W_UV products then run on bf16 weights too) stay near transformers' fp32 logits: every prompt
// row within 0.1 (logits reach |10|), except where bf16 rounding flips one routing choice
// between near-tied experts, which moves that one row by whole units (measured: one row of 40,
// deepseek_v3's grouped sigmoid routing; the rows after it stay within 0.06).
TEST(DeepseekConfig, Bf16WeightsStayNearTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  LoadOptions o;
  o.progress = false;
  o.max_batch_tokens = 64;
  o.weight_dtype = DType::bf16;
  for (const char* name : {"deepseek_v3", "deepseek_v2", "deepseek_v3_step"}) {
    auto m = Model::load(fixture_dir(name), *backend, o);
    ASSERT_TRUE(m.has_value()) << m.status().to_string();
    EXPECT_LT((*m)->weight_bytes(), (*m)->n_params() * 3) << "weights held as bf16";
    const int vocab = (*m)->config().vocab_size;
    int rows = 0, far_rows = 0;
    for (const auto& fc : read_fixture_cases(name)) {
      const auto run = testing::run_fixture_case(**m, *backend, fc);
      for (size_t r = 0; r < fc.logits.size(); ++r, ++rows)
        far_rows += max_abs_diff(run.logits.data() + r * static_cast<size_t>(vocab), fc.logits[r]) > 0.1f;
    }
    EXPECT_LE(far_rows, 1) << name << ": " << far_rows << " of " << rows << " rows off by more than 0.1";
  }
}

// step_cost by hand on the deepseek_v2 fixture (f32; hidden 64, 4 heads, R 32, nope/rope/v
// 16/8/16, q_proj, 8 experts of 16 with k = 2 and two shared, layer 0 dense of 128, vocab 128):
// the linear rule with k of E experts per token, MLA's 2 (R + rope) + 2 R flops per pair and
// head, the latent rows read once per sequence and written once per token.
TEST(DeepseekConfig, StepCostCountsMlaAndActiveExperts) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load_or_fail(fixture_dir("deepseek_v2"), *backend);
  ASSERT_NE(model, nullptr);
  const double h = 64, heads = 4, r = 32, dn = 16, dr = 8, dv = 16, inter = 128, vocab = 128, e = 8, k = 2, mi = 16;
  const double attn = heads * (dn + dr) * h + (r + dr) * h + r + heads * (dn + dv) * r + h * heads * dv + 2 * h;
  const double expert = 3 * h * mi;
  const double dense_layer = attn + 3 * h * inter, sparse_fixed = attn + e * h + 3 * h * 2 * mi;  // router, shared
  ASSERT_EQ(model->n_params(), static_cast<int64_t>(dense_layer + 2 * (sparse_fixed + e * expert) + h + 2 * vocab * h));
  const double fixed = dense_layer + 2 * sparse_fixed + h;
  const double kv_row = 3 * (r + dr) * 4;  // bytes per token: 3 layers of the f32 latent row
  const StepCost c = model->step_cost(testing::make_step({{0, {5, 6, 7}, 2, false}}, 16, 4), kv_row);
  const double pairs = 3 + 4 + 5;  // rows at positions 2, 3, 4
  EXPECT_DOUBLE_EQ(c.flops, 2 * (fixed + 2 * k * expert) * 3 + 2 * vocab * h + pairs * heads * (2 * (r + dr) + 2 * r) * 3);
  // 3 tokens x 2 experts: at most 6 of 8 per sparse layer; the context of 5 latent rows read, 3 written.
  EXPECT_DOUBLE_EQ(c.bytes, 4 * (fixed + 2 * 6 * expert + 3 * h + vocab * h) + kv_row * (5 + 3));
}

// The Hub's DeepSeek-V2-Lite config.json (its fields as published) parses into the V2-Lite shape:
// q_proj, latent 512 + 64, yarn x40 whose mscale_all_dim scales the softmax, 64 experts top-6
// softmax greedy, two shared, layer 0 dense. DeepSeek-V3's fp8 quantization_config (128x128
// blocks) parses into ModelConfig::quant.
TEST(DeepseekConfig, HubConfigs) {
  const char* v2_lite = R"({"architectures": ["DeepseekV2ForCausalLM"], "attention_bias": false,
    "attention_dropout": 0.0, "aux_loss_alpha": 0.001, "bos_token_id": 100000, "eos_token_id": 100001,
    "first_k_dense_replace": 1, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 10944, "kv_lora_rank": 512, "max_position_embeddings": 163840, "model_type": "deepseek_v2",
    "moe_intermediate_size": 1408, "moe_layer_freq": 1, "n_group": 1, "n_routed_experts": 64, "n_shared_experts": 2,
    "norm_topk_prob": false, "num_attention_heads": 16, "num_experts_per_tok": 6, "num_hidden_layers": 27,
    "num_key_value_heads": 16, "pretraining_tp": 1, "q_lora_rank": null, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06, "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40,
    "mscale": 0.707, "mscale_all_dim": 0.707, "original_max_position_embeddings": 4096, "type": "yarn"},
    "rope_theta": 10000, "routed_scaling_factor": 1.0, "scoring_func": "softmax", "seq_aux": true,
    "tie_word_embeddings": false, "topk_group": 1, "topk_method": "greedy", "torch_dtype": "bfloat16",
    "use_cache": true, "v_head_dim": 128, "vocab_size": 102400})";
  auto c = parse_hf_config(v2_lite);
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->q_lora_rank, 0);
  EXPECT_EQ(c->kv_lora_rank + c->qk_rope_head_dim, 576);
  EXPECT_EQ(c->n_moe_layers(), 26);
  EXPECT_EQ(c->moe_group_score, MoeGroupScore::none);
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::yarn);
  EXPECT_FLOAT_EQ(rope_attention_factor(c->rope_scaling), 1.0f);  // mscale == mscale_all_dim
  const float m = 0.1f * 0.707f * std::log(40.0f) + 1.0f;
  EXPECT_NEAR(c->attn_scale, m * m / std::sqrt(192.0f), 1e-6);
  auto j = nlohmann::json::parse(v2_lite);
  j["architectures"] = {"DeepseekV3ForCausalLM"};
  j["model_type"] = "deepseek_v3";
  j["scoring_func"] = "sigmoid";
  j["topk_method"] = "noaux_tc";
  j["quantization_config"] = {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"},
                              {"weight_block_size", {128, 128}}};
  auto v3 = parse_hf_config(j.dump());  // DeepSeek-V3's own fp8 checkpoint: dequantized at load
  ASSERT_TRUE(v3.has_value()) << v3.status().to_string();
  EXPECT_EQ(v3->quant.scaling, WeightScaling::block);
  EXPECT_EQ(v3->quant.block_rows, 128);
}

TEST(DeepseekConfig, Fp8WeightsAreRefused) {
  auto backend = make_cpu_backend({.n_threads = 1});
  LoadOptions o;
  o.progress = false;
  o.weight_dtype = DType::f8e4m3;
  auto m = Model::load(fixture_dir("deepseek_v3"), *backend, o);
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.status().code(), StatusCode::unsupported);
  EXPECT_NE(m.status().message().find("fp8"), std::string::npos) << m.status().to_string();
}

}  // namespace
}  // namespace brigade
