// llama.cpp's GGUF files of the Mamba family (models/gguf_mamba.h), written by llama.cpp's own
// converter from make_fixtures.py's checkpoints (scripts/make_gguf_mamba_fixtures.py): gguf_mamba2
// (mixers only), gguf_nemotron_h (mixer, attention and relu2 MLP blocks), gguf_nemotron_h_moe
// (Nemotron 3's relu2 experts in 2 groups, scaled), gguf_granitehybrid (mixers and attention, each
// followed by a shared SwiGLU and 4 experts, with Granite's multipliers), gguf_mamba1 and
// gguf_falcon_mamba (Mamba1 mixers; Falcon-Mamba's weightless dt/B/C norms), gguf_jamba (Mamba1
// mixers with weighted dt/B/C norms, attention, SwiGLU and MoE layers), in F32; llama.cpp itself
// runs them within 3e-5 of transformers (llamacpp.json).
// The config as llama.cpp reads it, transformers' logits, decode steps and greedy tokens, and
// what brigade does not read refused by name.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "gguf_writer.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/model.h"
#include "models/model_config.h"

namespace brigade {
namespace {

using testing::fixture_dir;

std::string gguf_path(const std::string& fixture) { return fixture_dir(fixture) + "/model.gguf"; }

const ModelConfig* open_config(const std::string& fixture, std::unique_ptr<Checkpoint>& ck) {
  auto opened = Checkpoint::open(gguf_path(fixture));
  EXPECT_TRUE(opened.has_value()) << fixture << ": " << opened.status().to_string();
  if (!opened) return nullptr;
  ck = std::move(*opened);
  return &ck->config();
}

// The layer kinds from the per-block counts, the mixers' shape from the ssm keys, Granite's
// multipliers and experts, and the tensors under the checkpoint's names and shapes.
TEST(GgufMamba, ReadsTheConfigsAsLlamaCppDoes) {
  std::unique_ptr<Checkpoint> ck;
  const ModelConfig* c = open_config("gguf_mamba2", ck);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->arch, "mamba2");
  EXPECT_EQ(c->ssm_layers, (std::vector<bool>{true, true}));
  EXPECT_EQ(c->n_attention_layers(), 0);
  EXPECT_EQ(c->ssm.layout.n_heads, 8);
  EXPECT_EQ(c->ssm.layout.head_dim, 16);
  EXPECT_EQ(c->ssm.layout.n_groups, 2);
  EXPECT_TRUE(c->ssm.gated_norm);
  EXPECT_TRUE(c->ssm.conv_bias);
  EXPECT_EQ(ck->tensors().at("backbone.layers.1.mixer.norm.weight").shape, (std::vector<int64_t>{128}));
  EXPECT_EQ(ck->tensors().at("backbone.layers.0.mixer.A_log").shape, (std::vector<int64_t>{8}));

  c = open_config("gguf_nemotron_h", ck);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->arch, "nemotron_h");
  EXPECT_EQ(c->ssm_layers, (std::vector<bool>{true, false, false, false, true}));
  EXPECT_EQ(c->mlp_layers, (std::vector<bool>{false, true, false, true, false}));
  EXPECT_EQ(c->n_attention_layers(), 1);
  EXPECT_TRUE(c->nope);
  EXPECT_EQ(c->intermediate_size, 96);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-5f) << "attention.layer_norm_epsilon";
  EXPECT_EQ(ck->tensors().count("backbone.layers.1.mixer.up_proj.weight"), 1u);

  c = open_config("gguf_granitehybrid", ck);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->arch, "granitemoehybrid");
  EXPECT_EQ(c->ssm_layers, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(c->n_experts, 4);
  EXPECT_EQ(c->moe_intermediate_size, 32);
  EXPECT_EQ(c->shared_width(), 48);
  EXPECT_FLOAT_EQ(c->attn_scale, 0.2f);
  EXPECT_FLOAT_EQ(c->embedding_multiplier, 3.0f);
  EXPECT_FLOAT_EQ(c->residual_multiplier, 0.5f);
  EXPECT_FLOAT_EQ(c->logits_scaling, 2.0f);
  EXPECT_EQ(ck->tensors().count("model.layers.0.shared_mlp.gate_proj.weight"), 1u);

  c = open_config("gguf_nemotron_h_moe", ck);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->arch, "nemotron_h");
  EXPECT_EQ(c->mlp_layers, (std::vector<bool>{false, true, false, true}));
  EXPECT_TRUE(c->relu2_experts);
  EXPECT_EQ(c->n_moe_layers(), 2);
  EXPECT_EQ(c->n_experts, 8);
  EXPECT_EQ(c->shared_width(), 48);
  const MoeRouting r = c->moe_routing();
  EXPECT_EQ(r.n_group, 2);
  EXPECT_EQ(r.topk_group, 1);
  EXPECT_EQ(r.group_score, MoeGroupScore::top2_sum);
  EXPECT_TRUE(r.normalize);
  EXPECT_FLOAT_EQ(r.scale, 2.5f);

  c = open_config("gguf_falcon_mamba", ck);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->arch, "falcon_mamba");
  EXPECT_TRUE(c->ssm.mamba1());
  EXPECT_EQ(c->ssm.dt_rank, 8);
  EXPECT_FLOAT_EQ(c->ssm.bcdt_norm_eps, 1e-5f);
  EXPECT_EQ(ck->tensors().at("backbone.layers.0.mixer.A_log").shape, (std::vector<int64_t>{128, 16}));
  c = open_config("gguf_mamba1", ck);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->arch, "mamba");
  EXPECT_EQ(c->ssm.bcdt_norm_eps, 0.0f);
  EXPECT_TRUE(c->tie_embeddings);

  c = open_config("gguf_jamba", ck);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->arch, "jamba");
  EXPECT_EQ(c->ssm_layers, (std::vector<bool>{true, true, false, true}));
  EXPECT_EQ(c->n_experts, 4);
  EXPECT_TRUE(c->is_moe_layer(1) && c->is_moe_layer(3) && !c->is_moe_layer(0) && !c->is_moe_layer(2));
  EXPECT_FALSE(c->norm_topk_prob);
  EXPECT_EQ(ck->tensors().count("model.layers.0.mamba.dt_layernorm.weight"), 1u);
}

class GgufMambaF32 : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufMambaF32, LogitsDecodeAndGreedyTokensMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  LoadOptions o = testing::test_load_options();
  o.state_slots = 1;
  auto model = testing::load_or_fail(gguf_path(GetParam()), *backend, o);
  ASSERT_NE(model, nullptr);
  testing::expect_fixture_cases_match(*model, *backend, GetParam(), 5e-4f);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GgufMambaF32,
                         ::testing::Values("gguf_mamba2", "gguf_nemotron_h", "gguf_nemotron_h_moe", "gguf_granitehybrid",
                                           "gguf_mamba1", "gguf_falcon_mamba", "gguf_jamba"),
                         [](const auto& p) { return p.param; });

// Refused naming what it is: Granite's attention with RoPE (rope.scaling.finetuned true, as
// llama.cpp takes an absent key), Nemotron 3 Super's latent projections, attention blocks of
// different head counts.
TEST(GgufMamba, RefusesWhatItDoesNotReadNamingIt) {
  const testing::TempDir dir("gguf_mamba_refused");
  const std::string path = dir.file("model.gguf");
  using testing::gguf_u32;
  // Blocks of `kv` heads each (0: a mixer) and MLP widths `ff` (nemotron_h's MLP blocks; granite's
  // shared MLP in every block).
  const auto header = [](const std::string& arch, std::vector<int32_t> kv, std::vector<int32_t> ff) {
    const std::string a = arch + ".";
    return std::vector<testing::GgufKv>{testing::gguf_str("general.architecture", arch),
                                        gguf_u32(a + "block_count", static_cast<uint32_t>(kv.size())),
                                        gguf_u32(a + "context_length", 64),
                                        gguf_u32(a + "embedding_length", 64),
                                        testing::gguf_i32s(a + "feed_forward_length", ff),
                                        gguf_u32(a + "attention.head_count", 4),
                                        testing::gguf_i32s(a + "attention.head_count_kv", kv),
                                        gguf_u32(a + "ssm.conv_kernel", 4),
                                        gguf_u32(a + "ssm.state_size", 16),
                                        gguf_u32(a + "ssm.group_count", 2),
                                        gguf_u32(a + "ssm.time_step_rank", 8),
                                        gguf_u32(a + "ssm.inner_size", 128)};
  };
  const std::pair<std::string, std::vector<uint64_t>> embed{"token_embd.weight", {64, 256}};
  const Status ok = testing::open_gguf_zeros(path, header("nemotron_h", {0, 2, 0}, {0, 0, 96}), {embed});
  ASSERT_TRUE(ok.is_ok()) << ok.to_string();
  auto kv = header("granitehybrid", {0, 2}, {96, 96});
  Status s = testing::open_gguf_zeros(path, kv, {embed});
  EXPECT_EQ(s.code(), StatusCode::unsupported) << s.to_string();
  EXPECT_NE(s.message().find("rope.scaling.finetuned"), std::string::npos) << s.message();
  kv.push_back(testing::gguf_bool("granitehybrid.rope.scaling.finetuned", false));
  EXPECT_TRUE(testing::open_gguf_zeros(path, kv, {embed}).is_ok());
  kv = header("nemotron_h_moe", {0, 2, 0}, {0, 0, 96});
  for (auto [key, v] : {std::pair{"expert_count", 8u}, {"expert_used_count", 2u}, {"expert_feed_forward_length", 32u},
                        {"expert_shared_feed_forward_length", 48u}, {"moe_latent_size", 32u}})
    kv.push_back(gguf_u32(std::string("nemotron_h_moe.") + key, v));
  s = testing::open_gguf_zeros(path, kv, {embed});
  EXPECT_EQ(s.code(), StatusCode::unsupported) << s.to_string();
  EXPECT_NE(s.message().find("moe_latent_size"), std::string::npos) << s.message();
  kv = header("nemotron_h", {0, 2, 0}, {0, 0, 96});
  kv.push_back(testing::GgufKv{"nemotron_h.attention.layer_norm_epsilon", 6, 0, 1e-3f});
  ASSERT_TRUE(testing::open_gguf_zeros(path, kv, {embed}).is_ok());
  EXPECT_FLOAT_EQ((*Checkpoint::open(path))->config().rms_eps, 1e-3f) << "the eps Nemotron-H's converter writes";
  s = testing::open_gguf_zeros(path, header("nemotron_h", {2, 0, 1}, {0, 96, 0}), {embed});
  EXPECT_EQ(s.code(), StatusCode::corrupt) << s.to_string();
  EXPECT_NE(s.message().find("head_count_kv"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace brigade
