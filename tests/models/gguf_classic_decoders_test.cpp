// llama.cpp's GGUF files of the four older dense decoders (models/gguf_classic_decoders.h):
// gguf_gemma, gguf_starcoder2, gguf_phi2, gguf_stablelm and gguf_stablelm_parallel, written by
// llama.cpp's own converter (scripts/make_gguf_classic_fixtures.py) from tiny GemmaForCausalLM,
// Starcoder2ForCausalLM, PhiForCausalLM and StableLmForCausalLM checkpoints of the Hugging Face
// fixtures' shapes. Their logits, decode steps and greedy tokens against transformers' (which
// llama.cpp's match within 1e-2 where its GELU rounds through an fp16 table, within 2e-6 for
// StableLM: the script's --llamacpp pass), their configs as the Hugging Face fixtures', and the
// refusal of what the reader does not take. Also gguf_jais2, gguf_nemotron and gguf_exaone
// (Jais2ForCausalLM, NemotronForCausalLM, ExaoneForCausalLM sources; llama.cpp within 1e-5 of
// transformers on them, as on StableLM).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gguf_variants_util.h"
#include "gguf_writer.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/model_config.h"

namespace brigade {
namespace {

class GgufClassicF32 : public ::testing::TestWithParam<std::string> {};

// llama.cpp's CPU GELU looks the activation up in an fp16 table, hence its looser bound for the
// GELU models.
TEST_P(GgufClassicF32, LogitsDecodeAndGreedyTokensMatchTransformers) {
  const bool gelu = GetParam() == "gguf_gemma" || GetParam() == "gguf_starcoder2" || GetParam() == "gguf_phi2";
  testing::expect_gguf_fixture_matches(GetParam(), 5e-4f, gelu ? 2e-2 : 1e-4);
}

// (gguf_jais2, gguf_nemotron, gguf_exaone: models/gguf_classic_decoders.h's relu2 decoders and
// EXAONE 3.x, tests/models/llama_relatives_test.cpp's configs.)
INSTANTIATE_TEST_SUITE_P(Fixtures, GgufClassicF32,
                         ::testing::Values("gguf_gemma", "gguf_starcoder2", "gguf_phi2", "gguf_stablelm",
                                           "gguf_stablelm_parallel", "gguf_jais2", "gguf_nemotron", "gguf_exaone"),
                         [](const auto& p) { return p.param; });

struct Pair {
  const char* gguf;
  const char* hf;
};

// Each file reads as its Hugging Face fixture: the attention, norms, biases, MLP, parallel blocks
// and head; every tensor of the fixture under the same name (but what the converter merges or
// drops: StableLM's per-head q/k norms, stacked; Gemma's lm_head, which it is tied to), and
// Gemma's norms stored as 1 + w (no offset left to add).
TEST(GgufClassic, ReadsAsItsHuggingFaceConfig) {
  for (const Pair& p : {Pair{"gguf_gemma", "gemma"}, Pair{"gguf_starcoder2", "starcoder2"}, Pair{"gguf_phi2", "phi"},
                        Pair{"gguf_stablelm", "stablelm"}, Pair{"gguf_stablelm_parallel", "stablelm_parallel"},
                        Pair{"gguf_jais2", "jais2"}, Pair{"gguf_nemotron", "nemotron"}, Pair{"gguf_exaone", "exaone"}}) {
    SCOPED_TRACE(p.gguf);
    const auto [hf, file] = testing::open_gguf_and_hf(p.gguf, p.hf);
    ASSERT_TRUE(hf && file);
    const ModelConfig& h = hf->config();
    const ModelConfig& g = file->config();
    testing::expect_same_attention(g, h);
    testing::expect_same_dense_layer(g, h);
    EXPECT_EQ(g.qkv_bias, h.qkv_bias);
    EXPECT_EQ(g.o_bias, h.o_bias);
    EXPECT_EQ(g.lm_head_bias, h.lm_head_bias);
    EXPECT_EQ(g.embed_scale, h.embed_scale);
    EXPECT_EQ(g.norm_offset, 0.0f) << "the converter stores Gemma's and Nemotron's norms as 1 + w";
    EXPECT_EQ(g.sliding_window, 0) << "llama.cpp's graphs of these have no window";
    const auto& gt = file->tensors();
    for (const auto& [name, t] : hf->tensors()) {
      if (name.find("layernorm.norms.") == std::string::npos && name != "lm_head.weight") {
        EXPECT_EQ(gt.count(name), 1u) << name;
      }
    }
  }
}

// A phi2 file with llama.cpp's fused attn_qkv (old conversions) is refused naming it; a LayerNorm
// architecture's file without attention.layer_norm_epsilon is refused naming the key.
TEST(GgufClassic, RefusesFusedQkvAndMissingEpsilon) {
  const testing::TempDir dir("gguf_classic");
  using testing::gguf_str;
  using testing::gguf_u32;
  const std::vector<testing::GgufKv> kv = {
      gguf_str("general.architecture", "phi2"), gguf_u32("phi2.block_count", 1),
      gguf_u32("phi2.context_length", 64),      gguf_u32("phi2.embedding_length", 32),
      gguf_u32("phi2.feed_forward_length", 128), gguf_u32("phi2.attention.head_count", 4),
      gguf_u32("phi2.rope.dimension_count", 4)};
  testing::expect_refused(dir.file("fused.gguf"), kv, {{"token_embd.weight", {32, 64}}, {"blk.0.attn_qkv.weight", {32, 96}}},
                          StatusCode::unsupported, "fused attn_qkv");
  const Status no_eps = testing::open_gguf_zeros(dir.file("no_eps.gguf"), kv,
                                                 {{"token_embd.weight", {32, 64}}, {"blk.0.attn_q.weight", {32, 32}}});
  EXPECT_FALSE(no_eps.is_ok());
  EXPECT_NE(no_eps.message().find("phi2.attention.layer_norm_epsilon"), std::string::npos) << no_eps.message();
}

}  // namespace
}  // namespace brigade
