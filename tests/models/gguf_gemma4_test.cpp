// llama.cpp's gemma4 GGUF files (models/gguf_gemma4.h), written by llama.cpp's own converter
// (scripts/make_gguf_gemma4_fixtures.py, --outtype f32) from the committed safetensors fixtures
// gemma4_dense (K=V, 1 KV head of 32 on the full layers), gemma4_e2b (per-layer inputs, the last
// 2 layers reusing K/V with double-wide MLPs) and gemma4_moe (the MoE block beside the MLP). The
// logits are checked against transformers' (the safetensors fixtures' expected.json): prefill,
// greedy tokens, cached decode steps, chunked prefill, a mixed step and a cached prefix. The
// configs as llama.cpp reads the keys, and refusals naming the key or tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu/cpu_backend.h"
#include "gguf_variants_util.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"

namespace brigade {
namespace {

using testing::expect_refused;
using testing::gguf_path;
using testing::GgufKv;
using testing::gguf_u32;
using testing::open_config;

// The safetensors fixture each GGUF fixture was converted from (its expected.json the reference).
constexpr std::pair<const char*, const char*> kFixtures[] = {
    {"gguf_gemma4_dense", "gemma4_dense"}, {"gguf_gemma4_e2b", "gemma4_e2b"}, {"gguf_gemma4_moe", "gemma4_moe"}};

ModelConfig hf_config(const std::string& fixture) {
  auto ck = Checkpoint::open(testing::fixture_dir(fixture));
  EXPECT_TRUE(ck.has_value()) << ck.status().to_string();
  return ck ? (*ck)->config() : ModelConfig{};
}

// Everything the decoder reads of a config is what read_gemma4_config makes of the source's
// config.json (the converter's keys carry all of it but the proportional factor, 1 here), and
// the values the fixtures were made with.
TEST(GgufGemma4, ConfigsAreTheSafetensorsFixtures) {
  for (const auto& [gguf, hf] : kFixtures) {
    SCOPED_TRACE(gguf);
    const ModelConfig g = open_config(gguf), h = hf_config(hf);
    EXPECT_EQ(g.arch, "gemma4_text");
    EXPECT_EQ(g.n_layers, h.n_layers);
    EXPECT_EQ(g.hidden_size, h.hidden_size);
    EXPECT_EQ(g.n_heads, h.n_heads);
    EXPECT_EQ(g.n_kv_heads, h.n_kv_heads);
    EXPECT_EQ(g.head_dim, h.head_dim);
    EXPECT_EQ(g.intermediate_size, h.intermediate_size);
    EXPECT_EQ(g.vocab_size, h.vocab_size);
    EXPECT_FLOAT_EQ(g.rms_eps, h.rms_eps);
    EXPECT_EQ(g.norm_offset, 0.0f);
    EXPECT_TRUE(g.sandwich_norms && g.qk_norm);
    EXPECT_EQ(g.mlp_activation, MlpActivation::gelu_tanh);
    EXPECT_EQ(g.rope_style, RopeStyle::neox);
    EXPECT_FLOAT_EQ(g.attn_scale, 1.0f);
    EXPECT_EQ(g.attn_softcap, 0.0f);
    EXPECT_FLOAT_EQ(g.final_softcap, h.final_softcap);
    EXPECT_FLOAT_EQ(g.embed_scale, h.embed_scale);
    EXPECT_EQ(g.sliding_window, h.sliding_window);
    EXPECT_EQ(g.sliding_layers, h.sliding_layers);
    EXPECT_FLOAT_EQ(g.rope_theta, h.rope_theta);
    EXPECT_FLOAT_EQ(g.rope_local_theta, h.rope_local_theta);
    EXPECT_TRUE(g.tie_embeddings);
    EXPECT_EQ(g.n_experts, h.n_experts);
    EXPECT_EQ(g.n_experts_per_tok, h.n_experts_per_tok);
    EXPECT_EQ(g.moe_intermediate_size, h.moe_intermediate_size);
    EXPECT_EQ(g.norm_topk_prob, h.norm_topk_prob);
    const auto &a = g.gemma4, &b = h.gemma4;
    EXPECT_EQ(a.full_head_dim, b.full_head_dim);
    EXPECT_EQ(a.full_kv_heads, b.full_kv_heads);
    EXPECT_EQ(a.k_eq_v, b.k_eq_v);
    EXPECT_FLOAT_EQ(a.full_rope_partial, b.full_rope_partial);
    EXPECT_FLOAT_EQ(a.full_rope_factor, b.full_rope_factor);
    EXPECT_EQ(a.per_layer_dim, b.per_layer_dim);
    if (b.per_layer_dim > 0) {
      EXPECT_EQ(a.per_layer_vocab, b.per_layer_vocab);
    }
    EXPECT_EQ(a.kv_layer, b.kv_layer);
    EXPECT_EQ(a.intermediate, b.intermediate);
    EXPECT_EQ(a.moe, b.moe);
    EXPECT_EQ(g.bos_id, 2) << "the converter's tokenizer: Gemma's <bos>";
  }
  const ModelConfig dense = open_config("gguf_gemma4_dense");
  EXPECT_TRUE(dense.gemma4.k_eq_v) << "no attn_v in the full layers";
  EXPECT_EQ(dense.gemma4.full_head_dim, 32);
  EXPECT_EQ(dense.gemma4.full_kv_heads, 1) << "head_count_kv [2, 2, 1, 2, 2, 1]";
  EXPECT_FLOAT_EQ(dense.gemma4.full_rope_partial, 0.25f) << "rope_freqs: 4 of 16 pairs 1, the rest 1e30";
  const ModelConfig e2b = open_config("gguf_gemma4_e2b");
  EXPECT_EQ(e2b.gemma4.kv_layer, (std::vector<int>{0, 1, 2, 3, 3, 2}));
  EXPECT_EQ(e2b.gemma4.intermediate, (std::vector<int>{48, 48, 48, 48, 96, 96}));
  EXPECT_EQ(e2b.gemma4.per_layer_dim, 8);
  const ModelConfig moe = open_config("gguf_gemma4_moe");
  EXPECT_TRUE(moe.gemma4.moe);
  EXPECT_EQ(moe.n_experts, 8);
  EXPECT_EQ(moe.moe_intermediate_size, 16);
}

// The tensors the converter renamed or rewrote are the checkpoint's, bit for bit (the norms
// unshifted: Gemma 4's scale by w).
TEST(GgufGemma4, TensorsAreTheCheckpointsUnderTheirNames) {
  for (const auto& [gguf, hf] : kFixtures) {
    SCOPED_TRACE(gguf);
    auto g = Checkpoint::open(gguf_path(gguf));
    auto h = Checkpoint::open(testing::fixture_dir(hf));
    ASSERT_TRUE(g.has_value() && h.has_value());
    size_t compared = 0;
    for (const auto& [name, t] : (*h)->tensors()) {
      auto it = (*g)->tensors().find(name);
      ASSERT_NE(it, (*g)->tensors().end()) << name;
      ASSERT_EQ(it->second.shape, t.shape) << name;
      ASSERT_EQ(it->second.bytes.size(), t.bytes.size()) << name;
      EXPECT_EQ(std::memcmp(it->second.bytes.data(), t.bytes.data(), t.bytes.size()), 0) << name;
      ++compared;
    }
    EXPECT_EQ(compared, (*g)->tensors().size()) << "no tensor the checkpoint lacks";
  }
}

// Prefill logits, greedy tokens and cached decode steps within 2e-4 of transformers'; chunked
// prefill (chunks crossing pages and the window of 8), a step mixing a continuation with another
// prompt, and a prompt whose first 16 positions come from the prefix cache, alike.
TEST(GgufGemma4, LogitsMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  for (const auto& [gguf, hf] : kFixtures) {
    SCOPED_TRACE(gguf);
    auto model = testing::load_or_fail(gguf_path(gguf), *backend);
    ASSERT_NE(model, nullptr);
    const auto cases = testing::read_fixture_cases(hf);
    ASSERT_EQ(cases.size(), 3u);
    const std::string name = gguf;
    for (const auto& c : cases) {
      const testing::FixtureRun run = testing::run_fixture_case(*model, *backend, c);
      EXPECT_LE(run.max_abs_diff, testing::kLogitTol) << "prompt of " << c.prompt.size();
      EXPECT_EQ(run.greedy, c.greedy) << "prompt of " << c.prompt.size();
      const float decode = testing::decode_max_diff(*model, *backend, c);
      EXPECT_LE(decode, testing::kLogitTol) << "prompt of " << c.prompt.size();
      const std::string n = std::to_string(c.prompt.size());
      RecordProperty(name + "_max_abs_diff_" + n, std::to_string(run.max_abs_diff));
      RecordProperty(name + "_decode_max_abs_diff_" + n, std::to_string(decode));
    }
    const auto& fc = cases.back();
    ASSERT_EQ(fc.prompt.size(), 40u);
    for (int chunk : {7, 5}) {
      const float d = testing::chunked_max_diff(*model, *backend, fc, chunk);
      EXPECT_LE(d, testing::kLogitTol) << "chunks of " << chunk;
      RecordProperty(name + "_chunked_max_abs_diff_" + std::to_string(chunk), std::to_string(d));
    }
    const float mixed = testing::mixed_step_max_diff(*model, *backend, fc, cases.front(), 20);
    EXPECT_LE(mixed, testing::kLogitTol);
    RecordProperty(name + "_mixed_max_abs_diff", std::to_string(mixed));
    const float cached = testing::cached_prefix_max_diff(*model, *backend, fc, 16);
    EXPECT_LE(cached, testing::kLogitTol);
    RecordProperty(name + "_cached_prefix_max_abs_diff", std::to_string(cached));
  }
}

// A gemma4 file's keys (the dense fixture's shape, 3 layers), with `changes` replacing or adding entries.
std::vector<GgufKv> gemma4_kv(const std::vector<GgufKv>& changes) {
  GgufKv pattern{"gemma4.attention.sliding_window_pattern", 9};
  pattern.elem_type = 7;
  pattern.i32s = {1, 1, 0};
  std::vector<GgufKv> kv = {testing::gguf_str("general.architecture", "gemma4"), gguf_u32("gemma4.block_count", 3),
                            gguf_u32("gemma4.context_length", 256), gguf_u32("gemma4.embedding_length", 32),
                            gguf_u32("gemma4.feed_forward_length", 48), gguf_u32("gemma4.attention.head_count", 4),
                            testing::gguf_i32s("gemma4.attention.head_count_kv", {2, 2, 1}),
                            gguf_u32("gemma4.attention.key_length", 32), gguf_u32("gemma4.attention.value_length", 32),
                            gguf_u32("gemma4.attention.key_length_swa", 16),
                            gguf_u32("gemma4.attention.value_length_swa", 16),
                            gguf_u32("gemma4.rope.dimension_count", 32), gguf_u32("gemma4.rope.dimension_count_swa", 16),
                            gguf_u32("gemma4.attention.sliding_window", 8), pattern};
  for (const GgufKv& c : changes) {
    auto it = std::find_if(kv.begin(), kv.end(), [&](const GgufKv& e) { return e.key == c.key; });
    if (it == kv.end()) kv.push_back(c);
    else *it = c;
  }
  return kv;
}

using Tensors = std::vector<std::pair<std::string, std::vector<uint64_t>>>;

// Some tensors of that file, ggml dims, all zeros (rope_freqs.weight too, where there is one): K
// projections 32 wide (2 heads of 16 on the sliding layers, 1 of 32 on the full one), attn_v in
// the sliding layers only (K=V on the full one).
Tensors gemma4_tensors(bool with_rope_freqs) {
  Tensors t = {{"token_embd.weight", {32, 128}}, {"output_norm.weight", {32}}};
  if (with_rope_freqs) t.push_back({"rope_freqs.weight", {16}});
  for (int l = 0; l < 3; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    t.push_back({b + "attn_k.weight", {32, 32}});
    if (l < 2) t.push_back({b + "attn_v.weight", {32, 32}});
  }
  return t;
}

TEST(GgufGemma4, RefusesWhatItCannotReadNamingIt) {
  const testing::TempDir dir("gguf_gemma4_bad");
  // rope_freqs.weight of zeros: not the converter's proportional form.
  expect_refused(dir.file("freqs.gguf"), gemma4_kv({}), gemma4_tensors(true), StatusCode::unsupported,
                 "rope_freqs.weight");
  // no rope_freqs.weight at all (llama.cpp requires it for the full layers).
  expect_refused(dir.file("no_freqs.gguf"), gemma4_kv({}), gemma4_tensors(false), StatusCode::corrupt,
                 "rope_freqs.weight");
  // sliding layers of different KV head counts: one shape per layer type.
  expect_refused(dir.file("kv.gguf"), gemma4_kv({testing::gguf_i32s("gemma4.attention.head_count_kv", {2, 1, 1})}),
                 gemma4_tensors(true), StatusCode::unsupported, "gemma4.attention.head_count_kv");
  // value heads wider than key heads.
  expect_refused(dir.file("v.gguf"), gemma4_kv({gguf_u32("gemma4.attention.value_length_swa", 32)}),
                 gemma4_tensors(true), StatusCode::unsupported, "gemma4.attention.value_length_swa");
  // partial rotation of the sliding layers.
  expect_refused(dir.file("rot.gguf"), gemma4_kv({gguf_u32("gemma4.rope.dimension_count_swa", 8)}),
                 gemma4_tensors(true), StatusCode::unsupported, "gemma4.rope.dimension_count_swa");
  // the pattern llama.cpp requires.
  auto no_pattern = gemma4_kv({});
  no_pattern.pop_back();
  expect_refused(dir.file("pattern.gguf"), no_pattern, gemma4_tensors(true), StatusCode::corrupt,
                 "sliding_window_pattern");
  // a fused attn_qkv, and experts split into gate and up.
  Tensors qkv = gemma4_tensors(true);
  qkv.push_back({"blk.0.attn_qkv.weight", {32, 128}});
  expect_refused(dir.file("qkv.gguf"), gemma4_kv({}), qkv, StatusCode::unsupported, "blk.0.attn_qkv.weight");
  Tensors split = gemma4_tensors(true);
  split.push_back({"blk.0.ffn_gate_exps.weight", {32, 16, 8}});
  expect_refused(dir.file("exps.gguf"), gemma4_kv({}), split, StatusCode::unsupported, "blk.0.ffn_gate_exps.weight");
  // a sliding layer without attn_v.
  Tensors no_v = gemma4_tensors(true);
  std::erase_if(no_v, [](const auto& e) { return e.first == "blk.1.attn_v.weight"; });
  expect_refused(dir.file("no_v.gguf"), gemma4_kv({}), no_v, StatusCode::unsupported, "blk.1.attn_v.weight");
}

}  // namespace
}  // namespace brigade
