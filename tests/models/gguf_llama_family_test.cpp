// llama.cpp's GGUF files of two Llama-decoder families (models/gguf_checkpoint.cpp), written by
// llama.cpp's own converter (scripts/make_gguf_llama_family_fixtures.py): gguf_smollm3 (NoPE every
// 4th layer, as llama.cpp's smollm3 hard-codes it) and gguf_granite (Granite 3's multipliers as
// metadata), F32, q/k rows permuted for llama.cpp's interleaved RoPE; llama.cpp itself runs them
// within 2e-5 of transformers (llamacpp.json). The config as llama.cpp reads it, and transformers'
// logits, decode steps and greedy tokens.
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

TEST(GgufLlamaFamily, ReadsTheConfigsAsLlamaCppDoes) {
  auto smol = Checkpoint::open(gguf_path("gguf_smollm3"));
  ASSERT_TRUE(smol.has_value()) << smol.status().to_string();
  const ModelConfig& s = (*smol)->config();
  EXPECT_EQ(s.arch, "smollm3");
  EXPECT_EQ(s.nope_layers, (std::vector<bool>{false, false, false, true}));
  EXPECT_EQ(s.rope_style, RopeStyle::interleaved) << "the converter permutes q/k for llama.cpp's RoPE";
  EXPECT_TRUE(s.tie_embeddings);
  auto granite = Checkpoint::open(gguf_path("gguf_granite"));
  ASSERT_TRUE(granite.has_value()) << granite.status().to_string();
  const ModelConfig& g = (*granite)->config();
  EXPECT_EQ(g.arch, "granite");
  EXPECT_FLOAT_EQ(g.embedding_multiplier, 3.0f);
  EXPECT_FLOAT_EQ(g.residual_multiplier, 0.5f);
  EXPECT_FLOAT_EQ(g.logits_scaling, 2.0f);
  EXPECT_FLOAT_EQ(g.attn_scale, 0.2f);
  EXPECT_EQ(g.rope_style, RopeStyle::interleaved);
  // Granite's RoPE switch off is refused by name.
  const testing::TempDir dir("gguf_granite_refused");
  using testing::gguf_u32;
  const std::vector<testing::GgufKv> kv = {testing::gguf_str("general.architecture", "granite"),
                                           gguf_u32("granite.block_count", 1),
                                           gguf_u32("granite.context_length", 64),
                                           gguf_u32("granite.embedding_length", 64),
                                           gguf_u32("granite.feed_forward_length", 96),
                                           gguf_u32("granite.attention.head_count", 4),
                                           testing::gguf_bool("granite.rope.scaling.finetuned", false)};
  const Status st = testing::open_gguf_zeros(dir.file("model.gguf"), kv, {{"token_embd.weight", {64, 256}}});
  EXPECT_EQ(st.code(), StatusCode::unsupported) << st.to_string();
  EXPECT_NE(st.message().find("rope.scaling.finetuned"), std::string::npos) << st.message();
}

class GgufLlamaFamilyF32 : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufLlamaFamilyF32, LogitsDecodeAndGreedyTokensMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = testing::load_or_fail(gguf_path(GetParam()), *backend);
  ASSERT_NE(model, nullptr);
  testing::expect_fixture_cases_match(*model, *backend, GetParam(), 5e-4f);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GgufLlamaFamilyF32, ::testing::Values("gguf_smollm3", "gguf_granite"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace brigade
