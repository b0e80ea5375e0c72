// llama.cpp's GGUF files of LFM2 (models/gguf_lfm2.h), written by llama.cpp's own converter from
// tiny transformers checkpoints (scripts/make_gguf_lfm2_fixtures.py): gguf_lfm2 (make_fixtures.py's
// lfm2 shapes: conv, conv, attention, conv; tied) and gguf_lfm2moe (a dense conv block, then
// attention and conv blocks with sigmoid-routed experts and expert_bias), in F32; llama.cpp itself
// runs both within 4e-5 of transformers (their llamacpp.json). The config as llama.cpp reads it,
// transformers' logits, decode steps and greedy tokens on the same weights, and what brigade does
// not read refused by name.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "gguf_writer.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/model.h"
#include "models/model_config.h"
#include "models/state_space.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::read_fixture_cases;

constexpr float kTol = 5e-4f;  // fp32 both sides, 7 printed digits

std::string gguf_path(const std::string& fixture) { return fixture_dir(fixture) + "/model.gguf"; }

// Which blocks are short convs (head_count_kv 0), the conv's taps, the attention's shape, the MLP
// width as the converter adjusted it, the experts, and the tensors under the checkpoint's names.
TEST(GgufLfm2, ReadsTheConfigAsLlamaCppDoes) {
  auto ck = Checkpoint::open(gguf_path("gguf_lfm2"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const ModelConfig& c = (*ck)->config();
  EXPECT_EQ((*ck)->format(), "gguf");
  EXPECT_EQ(c.arch, "lfm2");
  EXPECT_EQ(c.ssm_layers, (std::vector<bool>{true, true, false, true}));
  EXPECT_TRUE(c.ssm.short_conv);
  EXPECT_EQ(c.ssm.layout.conv_kernel, 3);
  EXPECT_EQ(c.ssm.layout.d_inner(), 64);
  EXPECT_FALSE(c.ssm.conv_bias);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FLOAT_EQ(c.rope_theta, 1e6f);
  EXPECT_EQ(c.intermediate_size, 128);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_EQ(recurrent_state_bytes(c), 3 * 2 * 64 * 4);
  const auto& t = (*ck)->tensors();
  EXPECT_EQ(t.at("model.layers.0.conv.conv.weight").shape, (std::vector<int64_t>{64, 1, 3}));
  EXPECT_EQ(t.at("model.layers.0.conv.in_proj.weight").shape, (std::vector<int64_t>{192, 64}));
  EXPECT_EQ(t.count("model.embedding_norm.weight"), 1u) << "token_embd_norm: the final norm";
  EXPECT_EQ(t.count("model.layers.2.self_attn.q_layernorm.weight"), 1u);

  auto moe = Checkpoint::open(gguf_path("gguf_lfm2moe"));
  ASSERT_TRUE(moe.has_value()) << moe.status().to_string();
  const ModelConfig& m = (*moe)->config();
  EXPECT_EQ(m.arch, "lfm2_moe");
  EXPECT_EQ(m.ssm_layers, (std::vector<bool>{true, false, true, true}));
  EXPECT_EQ(m.ssm.layout.conv_kernel, 4);
  EXPECT_EQ(m.n_experts, 8);
  EXPECT_EQ(m.n_experts_per_tok, 2);
  EXPECT_EQ(m.moe_intermediate_size, 32);
  EXPECT_EQ(m.intermediate_size, 96);
  EXPECT_EQ(m.n_moe_layers(), 3) << "leading_dense_block_count 1";
  const MoeRouting r = m.moe_routing();
  EXPECT_EQ(r.scoring, MoeScoring::sigmoid);
  EXPECT_TRUE(r.normalize) << "llama.cpp's graph renormalises LFM2-MoE's weights always";
  EXPECT_FLOAT_EQ(r.scale, 1.0f);
  EXPECT_TRUE(m.moe_score_bias);
  EXPECT_EQ((*moe)->tensors().count("model.layers.1.feed_forward.expert_bias"), 1u);
}

class GgufLfm2F32 : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufLfm2F32, LogitsDecodeAndGreedyTokensMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  LoadOptions o = testing::test_load_options();
  o.state_slots = 1;
  auto model = testing::load_or_fail(gguf_path(GetParam()), *backend, o);
  ASSERT_NE(model, nullptr);
  ASSERT_FALSE(read_fixture_cases(GetParam()).front().decode_logits.empty());
  testing::expect_fixture_cases_match(*model, *backend, GetParam(), kTol);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GgufLfm2F32, ::testing::Values("gguf_lfm2", "gguf_lfm2moe"),
                         [](const auto& p) { return p.param; });

// A tiny lfm2 / lfm2moe header (the keys llama.cpp's loader needs) with zero tensors.
std::vector<testing::GgufKv> header(const std::string& arch) {
  using testing::gguf_u32;
  const std::string a = arch + ".";
  std::vector<testing::GgufKv> kv = {testing::gguf_str("general.architecture", arch),
                                     gguf_u32(a + "block_count", 2),
                                     gguf_u32(a + "context_length", 64),
                                     gguf_u32(a + "embedding_length", 64),
                                     gguf_u32(a + "feed_forward_length", 96),
                                     gguf_u32(a + "attention.head_count", 4),
                                     testing::gguf_i32s(a + "attention.head_count_kv", {0, 2}),
                                     gguf_u32(a + "shortconv.l_cache", 3)};
  if (arch == "lfm2moe")
    for (auto [key, v] : {std::pair{"expert_count", 4u}, {"expert_used_count", 2u}, {"expert_feed_forward_length", 32u},
                          {"leading_dense_block_count", 1u}, {"expert_gating_func", 2u}})
      kv.push_back(gguf_u32(a + key, v));
  return kv;
}

// Refused naming what it is: q|k|v fused, a softmax-gated lfm2moe, head_count_kv of another
// length or with attention blocks of different counts, a missing shortconv.l_cache, a MoE
// layer's experts missing.
TEST(GgufLfm2, RefusesWhatItDoesNotReadNamingIt) {
  const testing::TempDir dir("gguf_lfm2_refused");
  const std::string path = dir.file("model.gguf");
  const auto open_status = [&](const std::vector<testing::GgufKv>& kv,
                               const std::vector<std::pair<std::string, std::vector<uint64_t>>>& tensors) {
    return testing::open_gguf_zeros(path, kv, tensors);
  };
  const std::pair<std::string, std::vector<uint64_t>> embed{"token_embd.weight", {64, 256}};
  ASSERT_TRUE(open_status(header("lfm2"), {embed}).is_ok());
  Status s = open_status(header("lfm2"), {embed, {"blk.1.attn_qkv.weight", {64, 128}}});
  EXPECT_EQ(s.code(), StatusCode::unsupported) << s.to_string();
  EXPECT_NE(s.message().find("blk.1.attn_qkv.weight"), std::string::npos) << s.message();
  auto kv = header("lfm2moe");
  kv.back() = testing::gguf_u32("lfm2moe.expert_gating_func", 1);
  s = open_status(kv, {embed});
  EXPECT_EQ(s.code(), StatusCode::unsupported) << s.to_string();
  EXPECT_NE(s.message().find("expert_gating_func"), std::string::npos) << s.message();
  for (const std::vector<int32_t>& counts : {std::vector<int32_t>{0, 2, 2}, {2, 1}, {0, 5}}) {
    kv = header("lfm2");
    kv[6] = testing::gguf_i32s("lfm2.attention.head_count_kv", counts);
    s = open_status(kv, {embed});
    EXPECT_EQ(s.code(), StatusCode::corrupt) << s.to_string();
    EXPECT_NE(s.message().find("head_count_kv"), std::string::npos) << s.message();
  }
  kv = header("lfm2");
  kv.pop_back();
  s = open_status(kv, {embed});
  EXPECT_EQ(s.code(), StatusCode::corrupt) << s.to_string();
  EXPECT_NE(s.message().find("lfm2.shortconv.l_cache"), std::string::npos) << s.message();
  s = open_status(header("lfm2moe"), {embed});
  EXPECT_EQ(s.code(), StatusCode::corrupt) << s.to_string();
  EXPECT_NE(s.message().find("blk.1.ffn_gate_inp.weight"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace brigade
