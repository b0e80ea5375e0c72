// What the GGUF tests of the Llama decoder's relatives share (gguf_llama_variants_test.cpp,
// gguf_cohere_hunyuan_test.cpp, gguf_llama_family_test.cpp): a fixture's model.gguf, its config, a
// refused file, and a file's experts as its Hugging Face fixture's.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "chat_test_util.h"
#include "cpu/cpu_backend.h"
#include "gguf_writer.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/model_config.h"

namespace brigade::testing {

inline std::string gguf_path(const std::string& fixture) { return fixture_dir(fixture) + "/model.gguf"; }

// A file of `kv` and zero `tensors` at `path` is refused with `code`, the message naming `key`.
inline void expect_refused(const std::string& path, const std::vector<GgufKv>& kv,
                           const std::vector<std::pair<std::string, std::vector<uint64_t>>>& tensors, StatusCode code,
                           const std::string& key) {
  const Status bad = open_gguf_zeros(path, kv, tensors);
  EXPECT_EQ(bad.code(), code) << key << ": " << bad.to_string();
  EXPECT_NE(bad.message().find(key), std::string::npos) << bad.message();
}

inline ModelConfig open_config(const std::string& fixture) {
  auto ck = Checkpoint::open(gguf_path(fixture));
  EXPECT_TRUE(ck.has_value()) << fixture << ": " << ck.status().to_string();
  return ck ? (*ck)->config() : ModelConfig{};
}

// How a GGUF file's q/k rows relate to its Hugging Face checkpoint's: as they are, or permuted by
// llama.cpp's converter for RoPE of adjacent pairs (llama's rule: the file's style is interleaved
// where the checkpoint's is neox).
enum class RopeRows { same, permuted };

// The attention of a GGUF file's config `g` as the Hugging Face fixture's `h`: the arch, RoPE's
// theta, width and style, the heads' width, the norms' epsilon and the q/k norms.
inline void expect_same_attention(const ModelConfig& g, const ModelConfig& h, RopeRows rows = RopeRows::same) {
  EXPECT_EQ(g.arch, h.arch);
  if (rows == RopeRows::permuted) {
    EXPECT_EQ(g.rope_style, RopeStyle::interleaved) << "the converter permutes q/k as llama's";
    EXPECT_EQ(h.rope_style, RopeStyle::neox);
  } else {
    EXPECT_EQ(g.rope_style, h.rope_style);
  }
  EXPECT_EQ(g.rope_theta, h.rope_theta);
  EXPECT_EQ(g.rope_dims(), h.rope_dims());
  EXPECT_EQ(g.head_dim, h.head_dim);
  EXPECT_FLOAT_EQ(g.rms_eps, h.rms_eps);
  EXPECT_EQ(g.qk_norm, h.qk_norm);
  EXPECT_EQ(g.qk_norm_whole, h.qk_norm_whole);
}

using GgufTensorShapes = std::vector<std::pair<std::string, std::vector<uint64_t>>>;

// A small MoE file of llama.cpp's `arch` to read keys from (gguf_dots1_test, gguf_afmoe_test): hidden
// 64, 4 heads, a dense width of 96, `blocks` layers of which the first `dense` are dense, 8 experts
// of 16 (top 2) beside `shared` shared experts of 16 each; its tensors (zeros) are the embedding
// and the last layer's router, experts and shared experts.
inline std::vector<GgufKv> moe_file_keys(const std::string& arch, uint32_t blocks, uint32_t dense, uint32_t shared) {
  return {gguf_str("general.architecture", arch),          gguf_u32(arch + ".block_count", blocks),
          gguf_u32(arch + ".context_length", 64),          gguf_u32(arch + ".embedding_length", 64),
          gguf_u32(arch + ".feed_forward_length", 96),     gguf_u32(arch + ".attention.head_count", 4),
          gguf_u32(arch + ".expert_count", 8),             gguf_u32(arch + ".expert_used_count", 2),
          gguf_u32(arch + ".leading_dense_block_count", dense), gguf_u32(arch + ".expert_shared_count", shared),
          gguf_u32(arch + ".expert_feed_forward_length", 16)};
}
inline GgufTensorShapes moe_file_tensors(uint32_t blocks, uint32_t shared) {
  const std::string b = "blk." + std::to_string(blocks - 1) + ".";
  const uint64_t s = 16u * shared;
  return {{"token_embd.weight", {64, 256}},         {b + "ffn_gate_inp.weight", {64, 8}},
          {b + "ffn_gate_exps.weight", {64, 16, 8}}, {b + "ffn_up_exps.weight", {64, 16, 8}},
          {b + "ffn_down_exps.weight", {16, 64, 8}}, {b + "ffn_gate_shexp.weight", {64, s}},
          {b + "ffn_up_shexp.weight", {64, s}},      {b + "ffn_down_shexp.weight", {s, 64}}};
}

// The Hugging Face fixture `hf`'s checkpoint and the GGUF fixture `gguf`'s file (test failures,
// and null, where either does not open).
struct CheckpointPair {
  std::unique_ptr<Checkpoint> hf, gguf;
};
inline CheckpointPair open_gguf_and_hf(const std::string& gguf, const std::string& hf) {
  CheckpointPair p;
  auto h = Checkpoint::open(fixture_dir(hf));
  EXPECT_TRUE(h.has_value()) << h.status().to_string();
  auto g = Checkpoint::open(gguf_path(gguf));
  EXPECT_TRUE(g.has_value()) << g.status().to_string();
  if (h && g) p = {std::move(*h), std::move(*g)};
  return p;
}

// The dense layer of a GGUF file's config `g` as the Hugging Face fixture's `h`, beside the
// attention (expect_same_attention): the k/v heads, the norms (LayerNorms, their biases), parallel
// blocks, the MLP (activation, gate, biases) and the tied head. q/k/v/o biases are the caller's
// (a converter may need them where the source has none).
inline void expect_same_dense_layer(const ModelConfig& g, const ModelConfig& h) {
  EXPECT_EQ(g.n_kv_heads, h.n_kv_heads);
  EXPECT_EQ(g.layer_norms, h.layer_norms);
  EXPECT_EQ(g.norm_bias, h.norm_bias);
  EXPECT_EQ(g.parallel_blocks, h.parallel_blocks);
  EXPECT_EQ(g.parallel_mlp_norm, h.parallel_mlp_norm);
  EXPECT_EQ(g.mlp_activation, h.mlp_activation);
  EXPECT_EQ(g.mlp_gated(), h.mlp_gated());
  EXPECT_EQ(g.mlp_bias, h.mlp_bias);
  EXPECT_EQ(g.tie_embeddings, h.tie_embeddings);
}

// Granite's multipliers of a GGUF file's config `g` as the Hugging Face fixture's `h`.
inline void expect_same_granite_scales(const ModelConfig& g, const ModelConfig& h) {
  EXPECT_EQ(g.embedding_multiplier, h.embedding_multiplier);
  EXPECT_EQ(g.residual_multiplier, h.residual_multiplier);
  EXPECT_EQ(g.attn_scale, h.attn_scale);
  EXPECT_EQ(g.logits_multiplier(), h.logits_multiplier());
}

// The experts of a GGUF file's config `g` as the Hugging Face fixture's `h`: their count, k and
// width, the sparse layers, the routing rule and the shared experts.
inline void expect_same_experts(const ModelConfig& g, const ModelConfig& h) {
  EXPECT_EQ(g.n_experts, h.n_experts);
  EXPECT_EQ(g.n_experts_per_tok, h.n_experts_per_tok);
  EXPECT_EQ(g.moe_intermediate_size, h.moe_intermediate_size);
  EXPECT_EQ(g.n_moe_layers(), h.n_moe_layers());
  EXPECT_EQ(g.moe_scoring, h.moe_scoring);
  EXPECT_EQ(g.moe_score_bias, h.moe_score_bias);
  EXPECT_EQ(g.norm_topk_prob, h.norm_topk_prob);
  EXPECT_EQ(g.routed_scaling_factor, h.routed_scaling_factor);
  EXPECT_EQ(g.shared_width(), h.shared_width());
  EXPECT_EQ(g.shared_gate, h.shared_gate);
}

// The fixture's model.gguf runs to transformers' logits, decode steps and greedy tokens within
// `tol` (each prompt's max |diff| recorded as a test property), and its llamacpp.json (the fixture
// script's --llamacpp pass) says llama.cpp ran the file within `llamacpp_bound` of them too.
inline void expect_gguf_fixture_matches(const std::string& fixture, float tol, double llamacpp_bound) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_or_fail(gguf_path(fixture), *backend);
  ASSERT_NE(model, nullptr);
  expect_fixture_cases_match(*model, *backend, fixture, tol);
  for (const auto& fc : read_fixture_cases(fixture))
    ::testing::Test::RecordProperty("max_abs_diff_" + std::to_string(fc.prompt.size()),
                                    std::to_string(run_fixture_case(*model, *backend, fc).max_abs_diff));
  const auto ref = load_fixture_json(fixture + "/llamacpp.json");
  ASSERT_FALSE(ref.is_discarded());
  ASSERT_EQ(ref["logits_max_diff"].size(), 3u);
  for (const auto& d : ref["logits_max_diff"]) EXPECT_LE(d.get<double>(), llamacpp_bound);
}

}  // namespace brigade::testing
