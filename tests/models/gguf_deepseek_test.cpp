// llama.cpp's deepseek2 GGUF (DeepSeek-V2 / V2-Lite, V3 / R1, Kimi-K2): tests/fixtures/gguf_deepseek_v2
// and gguf_deepseek_v3 are the deepseek_v2 / deepseek_v3 checkpoints written by llama.cpp's
// converter (scripts/make_gguf_deepseek_fixtures.py: kv_b_proj split into attn_k_b / attn_v_b, V2
// without q_lora, V3 with q_lora, sigmoid routing, groups and YaRN), gguf_deepseek_v3_q8_0 a V3
// shape of whole Q8_0 rows written Q8_0, and their
// reference is llama.cpp itself on each file (expected.json), which runs its own routing groups and
// YaRN factor (models/gguf_deepseek2.h). Also: the config as read beside the safetensors
// fixture's, each rule moving the logits, the vocabularies tokenizing as llama.cpp does, and
// refusals naming the key or tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "cpu/cpu_backend.h"
#include "gguf_variants_util.h"
#include "gguf_vocab.h"
#include "gguf_writer.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::gguf_path;
using testing::gguf_u32;
using testing::GgufKv;
using testing::read_fixture_cases;
using testing::TempDir;

constexpr float kTol = 1e-4f;  // F32 files and the Q8_0 file dequantized (measured 1e-6 to 3e-6)
// The Q8_0 file kept so against llama.cpp's run of it: both round the activations of the Q8_0
// products to Q8_0 per block, but brigade multiplies MLA's per-head k_b and v_b dequantized (with
// f32 activations) and sums in other orders, so the two differ by about what the rounding costs
// either: at most 1.5 times llama.cpp's own distance from its run of the exact values (0.70, 0.038
// and 0.094 on the three prompts; a router near a tie moves the 7-token one), plus kQ8Slack.
constexpr float kQ8Slack = 0.05f;

TEST(GgufDeepseek, ConfigAsLlamaCppReadsIt) {
  const ModelConfig v2 = testing::open_config("gguf_deepseek_v2");
  EXPECT_EQ(v2.arch, "deepseek_v2") << "no expert_gating_func: llama.cpp's softmax";
  EXPECT_EQ(v2.n_layers, 3);
  EXPECT_EQ(v2.q_lora_rank, 0);
  EXPECT_EQ(v2.kv_lora_rank, 32);
  EXPECT_EQ(v2.qk_nope_head_dim, 16) << "key_length_mla 24 less rope.dimension_count 8";
  EXPECT_EQ(v2.qk_rope_head_dim, 8);
  EXPECT_EQ(v2.v_head_dim, 16) << "value_length_mla";
  EXPECT_EQ(v2.n_kv_heads, 4) << "head_count_kv 1 is MLA's MQA view";
  EXPECT_EQ(v2.rope_style, RopeStyle::interleaved);
  EXPECT_EQ(v2.moe_scoring, MoeScoring::softmax);
  EXPECT_FALSE(v2.moe_score_bias);
  EXPECT_EQ(v2.n_group, 2);
  EXPECT_EQ(v2.topk_group, 1);
  EXPECT_EQ(v2.moe_group_score, MoeGroupScore::top2_sum) << "llama.cpp's groups, whatever the gating";
  EXPECT_FLOAT_EQ(v2.attn_scale, 1.0f / std::sqrt(24.0f));
  const ModelConfig v3 = testing::open_config("gguf_deepseek_v3");
  EXPECT_EQ(v3.arch, "deepseek_v3");
  EXPECT_EQ(v3.q_lora_rank, 24);
  EXPECT_EQ(v3.moe_scoring, MoeScoring::sigmoid);
  EXPECT_TRUE(v3.moe_score_bias);
  EXPECT_TRUE(v3.norm_topk_prob);
  EXPECT_EQ(v3.rope_scaling.type, RopeScalingType::yarn);
  EXPECT_FLOAT_EQ(v3.rope_scaling.attention_factor, 1.0f) << "yarn_log_multiplier stored: mscale = mscale_all_dim";
  const float m = 1.0f + 0.07f * std::log(4.0f);
  EXPECT_NEAR(v3.attn_scale, m * m / std::sqrt(24.0f), 1e-6f);
  auto ck = Checkpoint::open(gguf_path("gguf_deepseek_v3"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const auto& t = (*ck)->tensors();
  EXPECT_EQ(t.at("model.layers.0.self_attn.k_b_proj.weight").shape, (std::vector<int64_t>{4 * 32, 16}));
  EXPECT_EQ(t.at("model.layers.0.self_attn.v_b_proj.weight").shape, (std::vector<int64_t>{4 * 16, 32}));
  EXPECT_TRUE(t.contains("model.layers.1.mlp.gate.e_score_correction_bias"));
  EXPECT_TRUE(t.contains("model.layers.1.mlp.shared_experts.down_proj.weight"));
  EXPECT_TRUE(t.contains("model.layers.1.mlp.experts.gate_proj"));
}

// Each file's config as the safetensors fixture it was converted from, but for llama.cpp's rules
// (V2's groups scored by their top two, V3's YaRN mscale taken as mscale_all_dim).
TEST(GgufDeepseek, ConfigAsTheSafetensorsFixture) {
  for (const char* name : {"deepseek_v2", "deepseek_v3"}) {
    SCOPED_TRACE(name);
    const ModelConfig g = testing::open_config(std::string("gguf_") + name);
    auto ck = Checkpoint::open(fixture_dir(name));
    ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
    const ModelConfig& h = (*ck)->config();
    testing::expect_same_attention(g, h);
    EXPECT_EQ(g.n_layers, h.n_layers);
    EXPECT_EQ(g.hidden_size, h.hidden_size);
    EXPECT_EQ(g.n_heads, h.n_heads);
    EXPECT_EQ(g.n_kv_heads, h.n_kv_heads);
    EXPECT_EQ(g.vocab_size, h.vocab_size);
    EXPECT_EQ(g.intermediate_size, h.intermediate_size);
    EXPECT_EQ(g.q_lora_rank, h.q_lora_rank);
    EXPECT_EQ(g.kv_lora_rank, h.kv_lora_rank);
    EXPECT_EQ(g.qk_nope_head_dim, h.qk_nope_head_dim);
    EXPECT_EQ(g.qk_rope_head_dim, h.qk_rope_head_dim);
    EXPECT_EQ(g.v_head_dim, h.v_head_dim);
    EXPECT_EQ(g.tie_embeddings, h.tie_embeddings);
    EXPECT_EQ(g.first_k_dense_replace, h.first_k_dense_replace);
    EXPECT_EQ(g.n_group, h.n_group);
    EXPECT_EQ(g.topk_group, h.topk_group);
    testing::expect_same_experts(g, h);
    EXPECT_EQ(g.rope_scaling.type, h.rope_scaling.type);
    EXPECT_EQ(g.rope_scaling.factor, h.rope_scaling.factor);
    EXPECT_EQ(g.rope_scaling.original_max_position, h.rope_scaling.original_max_position);
    EXPECT_NEAR(g.rope_scaling.mscale_all_dim, h.rope_scaling.mscale_all_dim, 1e-6f);
    EXPECT_NEAR(g.attn_scale, h.attn_scale, 1e-6f) << "mscale(factor, mscale_all_dim)^2 / sqrt(24) both";
  }
  EXPECT_EQ(testing::open_config("gguf_deepseek_v2").moe_group_score, MoeGroupScore::top2_sum);
  auto v2 = Checkpoint::open(fixture_dir("deepseek_v2"));
  ASSERT_TRUE(v2.has_value());
  EXPECT_EQ((*v2)->config().moe_group_score, MoeGroupScore::max) << "transformers' group_limited_greedy";
}

// Every case of expected.json (llama.cpp's run) within tol, its greedy tokens and decode steps; the
// vocabulary tokenizing as llama.cpp does. `weights` as LoadOptions::weight_dtype.
void expect_matches_llamacpp(const std::string& fixture, float tol, std::optional<DType> weights = std::nullopt) {
  SCOPED_TRACE(fixture);
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = testing::load_or_fail(gguf_path(fixture), *backend, weights);
  ASSERT_NE(model, nullptr);
  const auto cases = read_fixture_cases(fixture);
  ASSERT_EQ(cases.size(), 3u);
  for (const auto& fc : cases) {
    const auto run = testing::run_fixture_case(*model, *backend, fc);
    EXPECT_LE(run.max_abs_diff, tol) << "prompt of " << fc.prompt.size();
    EXPECT_EQ(run.greedy, fc.greedy) << "prompt of " << fc.prompt.size();
    ASSERT_FALSE(fc.decode_logits.empty());
    const float d = testing::decode_max_diff(*model, *backend, fc);
    EXPECT_LE(d, tol) << "prompt of " << fc.prompt.size();
    ::testing::Test::RecordProperty("max_abs_diff_" + std::to_string(fc.prompt.size()), std::to_string(run.max_abs_diff));
    ::testing::Test::RecordProperty("decode_max_abs_diff_" + std::to_string(fc.prompt.size()), std::to_string(d));
  }
  testing::expect_tokenizes_as_llamacpp(fixture, 3);
}

TEST(GgufDeepseek, V2LiteMatchesLlamaCpp) { expect_matches_llamacpp("gguf_deepseek_v2", kTol); }
TEST(GgufDeepseek, V3MatchesLlamaCpp) { expect_matches_llamacpp("gguf_deepseek_v3", kTol); }

// Every block of the Q8_0 file read where it belongs: dequantized, llama.cpp's logits of the file's
// F32 copy (expected.json).
TEST(GgufDeepseek, V3Q8_0DequantizedMatchesLlamaCppOnItsValues) {
  expect_matches_llamacpp("gguf_deepseek_v3_q8_0", kTol, DType::f32);
}

// Kept Q8_0 (the routed experts in their stored blocks: Backend::moe_experts_split), against
// llama.cpp's run of the file itself (llamacpp.json's quantized cases).
TEST(GgufDeepseek, V3Q8_0KeptQuantizedFollowsLlamaCpp) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = testing::load_or_fail(gguf_path("gguf_deepseek_v3_q8_0"), *backend, std::nullopt);
  ASSERT_NE(model, nullptr);
  // f32 would be 4 bytes a weight; the matrices stay at 8.5 bits (MLA's k_b / v_b, norms and the
  // router excepted).
  EXPECT_LT(model->weight_bytes(), model->n_params() * 2) << model->weight_bytes() << " bytes";
  const auto ref = testing::load_fixture_json("gguf_deepseek_v3_q8_0/llamacpp.json");
  ASSERT_FALSE(ref.is_discarded());
  const auto& quantized = ref.at("quantized");
  const auto cases = read_fixture_cases("gguf_deepseek_v3_q8_0");
  ASSERT_EQ(quantized.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    testing::FixtureCase fc = cases[i];
    fc.logits = quantized[i].at("logits").get<std::vector<std::vector<float>>>();
    fc.greedy = quantized[i].at("greedy").get<std::vector<int32_t>>();
    float rounding = 0.0f;  // llama.cpp's Q8_0 run from its run of the exact values
    for (size_t r = 0; r < fc.logits.size(); ++r)
      for (size_t v = 0; v < fc.logits[r].size(); ++v)
        rounding = std::max(rounding, std::fabs(fc.logits[r][v] - cases[i].logits[r][v]));
    const float bound = 1.5f * rounding + kQ8Slack;
    const auto run = testing::run_fixture_case(*model, *backend, fc);
    EXPECT_LE(run.max_abs_diff, bound) << "prompt of " << fc.prompt.size();
    EXPECT_TRUE(testing::greedy_follows(run, fc, {fc.greedy, cases[i].greedy}, bound)) << "prompt of " << fc.prompt.size();
    ::testing::Test::RecordProperty("vs_llamacpp_" + std::to_string(fc.prompt.size()), std::to_string(run.max_abs_diff));
  }
}

// Max |Δlogit| from llama.cpp's logits on fixture's longest prompt with the config changed by `edit`.
float diff_with_rules(const std::string& fixture, const std::function<void(ModelConfig&)>& edit) {
  return testing::max_diff_with_rules(fixture, edit, gguf_path(fixture));
}

// The rules llama.cpp runs that transformers does not (its group score, its YaRN factor) and the
// parts the keys carry each move the logits far.
TEST(GgufDeepseek, EachRuleChangesTheResult) {
  const float far = 100 * kTol;
  const std::string v2 = "gguf_deepseek_v2", v3 = "gguf_deepseek_v3";
  EXPECT_GT(diff_with_rules(v2, [](ModelConfig& c) { c.moe_group_score = MoeGroupScore::max; }), far);
  EXPECT_GT(diff_with_rules(v2, [](ModelConfig& c) { c.routed_scaling_factor = 1.0f; }), far);
  EXPECT_GT(diff_with_rules(v2, [](ModelConfig& c) { c.n_shared_experts = 0; }), far);
  EXPECT_GT(diff_with_rules(v2, [](ModelConfig& c) { c.rope_style = RopeStyle::neox; }), far);
  // transformers' cos/sin factor for the fixture's mscale 1 over mscale_all_dim 0.7
  EXPECT_GT(diff_with_rules(v3, [](ModelConfig& c) { c.rope_scaling.attention_factor = 1.0382f; }), far);
  EXPECT_GT(diff_with_rules(v3, [](ModelConfig& c) { c.moe_score_bias = false; }), far);
  EXPECT_GT(diff_with_rules(v3, [](ModelConfig& c) { c.norm_topk_prob = false; }), far);
  EXPECT_GT(diff_with_rules(v3, [](ModelConfig& c) { c.moe_group_score = MoeGroupScore::none; }), far);
}

// A deepseek2 GGUF of 2 layers (0 dense, 1 sparse: 4 experts of 16 in 2 groups, one shared), heads
// of nope 16 + rope 8 and v 16 over a latent of 32, q_lora 24, in the current layout (attn_k_b /
// attn_v_b), whose keys are those the converter writes less `drop`, plus `extra`, and whose tensors
// are zeros: `tensors` replacing the defaults of the same name (a shape of no dims removes one).
std::string write_header(const TempDir& dir, const std::string& file, const std::vector<std::string>& drop,
                         std::vector<GgufKv> extra,
                         const std::vector<std::pair<std::string, std::vector<uint64_t>>>& tensors = {}) {
  const std::string a = "deepseek2.";
  std::vector<GgufKv> kv = {
      testing::gguf_str("general.architecture", "deepseek2"), gguf_u32(a + "block_count", 2),
      gguf_u32(a + "context_length", 256), gguf_u32(a + "embedding_length", 64), gguf_u32(a + "feed_forward_length", 96),
      gguf_u32(a + "attention.head_count", 4), gguf_u32(a + "attention.head_count_kv", 1),
      gguf_u32(a + "attention.q_lora_rank", 24), gguf_u32(a + "attention.kv_lora_rank", 32),
      gguf_u32(a + "attention.key_length", 40), gguf_u32(a + "attention.value_length", 32),
      gguf_u32(a + "attention.key_length_mla", 24), gguf_u32(a + "attention.value_length_mla", 16),
      gguf_u32(a + "rope.dimension_count", 8), gguf_u32(a + "expert_count", 4), gguf_u32(a + "expert_used_count", 2),
      gguf_u32(a + "expert_feed_forward_length", 16), gguf_u32(a + "expert_shared_count", 1),
      gguf_u32(a + "leading_dense_block_count", 1), gguf_u32(a + "expert_gating_func", 2),
      gguf_u32(a + "expert_group_count", 2), gguf_u32(a + "expert_group_used_count", 1)};
  std::erase_if(kv, [&](const GgufKv& e) { return std::find(drop.begin(), drop.end(), e.key) != drop.end(); });
  kv.insert(kv.end(), extra.begin(), extra.end());
  std::vector<std::pair<std::string, std::vector<uint64_t>>> all = {{"token_embd.weight", {64, 8}},
                                                                    {"blk.1.ffn_gate_inp.weight", {64, 4}},
                                                                    {"blk.1.ffn_gate_exps.weight", {64, 16, 4}},
                                                                    {"blk.1.ffn_up_exps.weight", {64, 16, 4}},
                                                                    {"blk.1.ffn_down_exps.weight", {16, 64, 4}}};
  for (int l = 0; l < 2; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    for (auto& [n, d] : std::vector<std::pair<std::string, std::vector<uint64_t>>>{
             {"attn_q_a.weight", {64, 24}},      {"attn_q_b.weight", {24, 96}},   {"attn_kv_a_mqa.weight", {64, 40}},
             {"attn_k_b.weight", {16, 32, 4}},   {"attn_v_b.weight", {32, 16, 4}}, {"attn_output.weight", {64, 64}}})
      all.emplace_back(b + n, d);
  }
  for (const auto& [name, dims] : tensors) {
    std::erase_if(all, [&](const auto& t) { return t.first == name; });
    if (!dims.empty()) all.emplace_back(name, dims);
  }
  const std::string path = dir.file(file);
  testing::write_gguf_zeros(path, kv, all);
  return path;
}

TEST(GgufDeepseek, LayoutsAndDefaults) {
  const TempDir dir("gguf_deepseek_keys");
  const std::string a = "deepseek2.";
  auto ck = Checkpoint::open(write_header(dir, "v3.gguf", {}, {}));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  EXPECT_EQ((*ck)->config().arch, "deepseek_v3");
  EXPECT_EQ((*ck)->config().moe_group_score, MoeGroupScore::top2_sum);
  // V2-Lite's files: no q_lora_rank key (llama.cpp knows them by their 27 layers), attn_q; no
  // gating key: softmax; an MTP block after the layers, not loaded.
  ck = Checkpoint::open(write_header(
      dir, "lite.gguf", {a + "attention.q_lora_rank", a + "expert_gating_func", a + "block_count"},
      {gguf_u32(a + "block_count", 3), gguf_u32(a + "nextn_predict_layers", 1)},
      {{"blk.0.attn_q_a.weight", {}}, {"blk.0.attn_q_b.weight", {}}, {"blk.1.attn_q_a.weight", {}},
       {"blk.1.attn_q_b.weight", {}}, {"blk.0.attn_q.weight", {64, 96}}, {"blk.1.attn_q.weight", {64, 96}},
       {"blk.2.attn_q.weight", {64, 96}}, {"blk.2.nextn.eh_proj.weight", {128, 64}}}));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  EXPECT_EQ((*ck)->config().arch, "deepseek_v2");
  EXPECT_EQ((*ck)->config().q_lora_rank, 0);
  EXPECT_EQ((*ck)->config().n_layers, 2);
  EXPECT_FALSE((*ck)->tensors().contains("model.layers.2.self_attn.q_proj.weight"));
  // Files from before llama.cpp split kv_b: per-head key_length / value_length, attn_kv_b whole.
  ck = Checkpoint::open(write_header(
      dir, "legacy.gguf",
      {a + "attention.key_length", a + "attention.value_length", a + "attention.key_length_mla",
       a + "attention.value_length_mla"},
      {gguf_u32(a + "attention.key_length", 24), gguf_u32(a + "attention.value_length", 16)},
      {{"blk.0.attn_k_b.weight", {}}, {"blk.0.attn_v_b.weight", {}}, {"blk.1.attn_k_b.weight", {}},
       {"blk.1.attn_v_b.weight", {}}, {"blk.0.attn_kv_b.weight", {32, 128}}, {"blk.1.attn_kv_b.weight", {32, 128}}}));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  EXPECT_EQ((*ck)->config().qk_nope_head_dim, 16);
  EXPECT_EQ((*ck)->config().v_head_dim, 16);
  EXPECT_EQ((*ck)->tensors().at("model.layers.1.self_attn.kv_b_proj.weight").shape, (std::vector<int64_t>{128, 32}));
  // YaRN without yarn_log_multiplier: llama.cpp's cos/sin factor mscale(4, 1), the softmax scaled by
  // its square (its kq_scale from the attn_factor it passes to RoPE).
  ck = Checkpoint::open(write_header(dir, "yarn.gguf", {},
                                     {testing::gguf_str(a + "rope.scaling.type", "yarn"),
                                      GgufKv{a + "rope.scaling.factor", 6, 0, 4.0f},
                                      gguf_u32(a + "rope.scaling.original_context_length", 64)}));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const float m = 1.0f + 0.1f * std::log(4.0f);
  EXPECT_FLOAT_EQ((*ck)->config().rope_scaling.attention_factor, m);
  EXPECT_NEAR((*ck)->config().attn_scale, m * m / std::sqrt(24.0f), 1e-6f);
  EXPECT_EQ((*ck)->config().rope_scaling.mscale_all_dim, 0.0f);
}

TEST(GgufDeepseek, RefusalsNamingTheKeyOrTensor) {
  const TempDir dir("gguf_deepseek_bad");
  const std::string a = "deepseek2.";
  struct Bad {
    std::vector<std::string> drop;
    std::vector<GgufKv> extra;
    std::vector<std::pair<std::string, std::vector<uint64_t>>> tensors;
    StatusCode code;
    std::string key;
  };
  const std::vector<Bad> bad = {
      {{a + "attention.kv_lora_rank"}, {}, {}, StatusCode::corrupt, a + "attention.kv_lora_rank"},
      {{a + "rope.dimension_count"}, {}, {}, StatusCode::corrupt, a + "rope.dimension_count"},
      {{a + "attention.key_length_mla"}, {gguf_u32(a + "attention.key_length_mla", 8)}, {}, StatusCode::corrupt,
       a + "attention.key_length_mla"},
      {{a + "attention.key_length"}, {gguf_u32(a + "attention.key_length", 24)}, {}, StatusCode::corrupt,
       a + "attention.key_length"},
      {{a + "expert_shared_count"}, {}, {}, StatusCode::corrupt, a + "expert_shared_count"},
      {{a + "expert_gating_func"}, {gguf_u32(a + "expert_gating_func", 3)}, {}, StatusCode::unsupported,
       a + "expert_gating_func"},
      {{a + "expert_count", a + "expert_used_count"}, {}, {}, StatusCode::unsupported, a + "expert_count"},
      {{a + "expert_group_count"}, {gguf_u32(a + "expert_group_count", 3)}, {}, StatusCode::corrupt,
       a + "expert_group_count"},
      {{}, {gguf_u32(a + "nextn_predict_layers", 2)}, {}, StatusCode::corrupt, a + "nextn_predict_layers"},
      // The temperature without its unit (llama.cpp asserts; gguf_mla_temperature_test.cpp runs it).
      {{}, {GgufKv{a + "attention.temperature_scale", 6, 0, 0.5f}}, {}, StatusCode::corrupt,
       a + "attention.temperature_length"},
      {{}, {testing::gguf_str(a + "rope.scaling.type", "linear")}, {}, StatusCode::unsupported, a + "rope.scaling.type"},
      // Shapes that do not follow from the keys, and kv_b in neither layout.
      {{}, {}, {{"blk.0.attn_kv_a_mqa.weight", {64, 48}}}, StatusCode::corrupt, "blk.0.attn_kv_a_mqa.weight"},
      {{}, {}, {{"blk.1.attn_q_b.weight", {24, 64}}}, StatusCode::corrupt, "blk.1.attn_q_b.weight"},
      {{}, {}, {{"blk.0.attn_k_b.weight", {16, 32, 2}}}, StatusCode::corrupt, "blk.0.attn_k_b.weight"},
      {{}, {}, {{"blk.1.attn_k_b.weight", {}}, {"blk.1.attn_v_b.weight", {}}}, StatusCode::corrupt,
       "blk.1.attn_kv_b.weight"},
      {{}, {}, {{"blk.1.ffn_down_exps.weight", {16, 64, 2}}}, StatusCode::corrupt, "blk.1.ffn_down_exps.weight"},
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    auto refused = Checkpoint::open(write_header(dir, std::to_string(i) + ".gguf", bad[i].drop, bad[i].extra, bad[i].tensors));
    ASSERT_FALSE(refused.has_value()) << bad[i].key;
    EXPECT_EQ(refused.status().code(), bad[i].code) << refused.status().to_string();
    EXPECT_NE(refused.status().message().find(bad[i].key), std::string::npos) << refused.status().to_string();
  }
}

}  // namespace
}  // namespace brigade
