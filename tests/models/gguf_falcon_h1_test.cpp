// llama.cpp's GGUF file of Falcon-H1 (models/gguf_falcon_h1.h), written by llama.cpp's own converter
// from make_fixtures.py's falcon_h1 shapes (scripts/make_gguf_falcon_h1_fixtures.py: every muP
// multiplier apart from 1, folded into the weights by the converter; head_dim 32 apart from
// hidden / heads), F32; llama.cpp itself runs it within 3e-6 of transformers (llamacpp.json). The
// config as llama.cpp reads it, transformers' logits, decode steps and greedy tokens, and what
// brigade does not read refused by name.
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

std::string gguf_path() { return fixture_dir("gguf_falcon_h1") + "/model.gguf"; }

// The mixer's shape from the ssm keys, attention in every layer, no multipliers left (the file has
// them folded in), the tensors under the checkpoint's names and shapes.
TEST(GgufFalconH1, ReadsTheConfigAsLlamaCppDoes) {
  auto ck = Checkpoint::open(gguf_path());
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const ModelConfig& c = (*ck)->config();
  EXPECT_EQ(c.arch, "falcon_h1");
  EXPECT_TRUE(c.parallel_attention);
  EXPECT_EQ(c.n_attention_layers(), 3);
  EXPECT_EQ(c.ssm_layers, (std::vector<bool>{true, true, true}));
  const SsmLayout& l = c.ssm.layout;
  EXPECT_EQ(l.n_heads, 6);
  EXPECT_EQ(l.head_dim, 16);
  EXPECT_EQ(l.n_groups, 2);
  EXPECT_EQ(l.state_size, 16);
  EXPECT_EQ(l.conv_kernel, 4);
  EXPECT_TRUE(c.ssm.conv_bias);
  EXPECT_FALSE(c.ssm.gated_norm);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_FLOAT_EQ(c.rope_theta, 1e5f);
  EXPECT_FLOAT_EQ(c.mup.key, 1.0f);
  EXPECT_FLOAT_EQ(c.mup.ssm_rows[4], 1.0f);
  EXPECT_FALSE(c.tie_embeddings);
  const auto& t = (*ck)->tensors();
  EXPECT_EQ(t.at("model.layers.0.mamba.A_log").shape, (std::vector<int64_t>{6}));
  EXPECT_EQ(t.at("model.layers.0.mamba.conv1d.weight").shape, (std::vector<int64_t>{160, 1, 4}));
  EXPECT_EQ(t.at("model.layers.0.mamba.in_proj.weight").shape, (std::vector<int64_t>{262, 64}));
  EXPECT_EQ(t.count("model.layers.2.pre_ff_layernorm.weight"), 1u) << "blk.2.ffn_norm, without .weight";
  EXPECT_EQ(t.count("model.final_layernorm.weight"), 1u);
}

TEST(GgufFalconH1, LogitsDecodeAndGreedyTokensMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  LoadOptions o = testing::test_load_options();
  o.state_slots = 1;
  auto model = testing::load_or_fail(gguf_path(), *backend, o);
  ASSERT_NE(model, nullptr);
  testing::expect_fixture_cases_match(*model, *backend, "gguf_falcon_h1", 5e-4f);
}

// Refused naming what it is: projection biases (llama.cpp's loader has none), a mixer width that
// is not whole heads, a missing ssm key.
TEST(GgufFalconH1, RefusesWhatItDoesNotReadNamingIt) {
  const testing::TempDir dir("gguf_falcon_h1_refused");
  const std::string path = dir.file("model.gguf");
  using testing::gguf_u32;
  const std::string a = "falcon-h1.";
  const std::vector<testing::GgufKv> kv = {testing::gguf_str("general.architecture", "falcon-h1"),
                                           gguf_u32(a + "block_count", 1),
                                           gguf_u32(a + "context_length", 64),
                                           gguf_u32(a + "embedding_length", 64),
                                           gguf_u32(a + "feed_forward_length", 96),
                                           gguf_u32(a + "attention.head_count", 4),
                                           gguf_u32(a + "attention.head_count_kv", 2),
                                           gguf_u32(a + "ssm.conv_kernel", 4),
                                           gguf_u32(a + "ssm.state_size", 16),
                                           gguf_u32(a + "ssm.group_count", 2),
                                           gguf_u32(a + "ssm.time_step_rank", 6),
                                           gguf_u32(a + "ssm.inner_size", 96)};
  const std::pair<std::string, std::vector<uint64_t>> embed{"token_embd.weight", {64, 256}};
  ASSERT_TRUE(testing::open_gguf_zeros(path, kv, {embed}).is_ok());
  Status s = testing::open_gguf_zeros(path, kv, {embed, {"blk.0.ssm_out.bias", {64}}});
  EXPECT_EQ(s.code(), StatusCode::unsupported) << s.to_string();
  EXPECT_NE(s.message().find("projection biases"), std::string::npos) << s.message();
  auto bad = kv;
  bad.back() = gguf_u32(a + "ssm.inner_size", 100);  // not whole heads of 6
  s = testing::open_gguf_zeros(path, bad, {embed});
  EXPECT_EQ(s.code(), StatusCode::corrupt) << s.to_string();
  EXPECT_NE(s.message().find("ssm.inner_size"), std::string::npos) << s.message();
  bad = kv;
  bad.erase(bad.begin() + 7);  // ssm.conv_kernel
  s = testing::open_gguf_zeros(path, bad, {embed});
  EXPECT_EQ(s.code(), StatusCode::corrupt) << s.to_string();
  EXPECT_NE(s.message().find("falcon-h1.ssm.conv_kernel"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace brigade
