// llama.cpp's GGUF files of the classic GPT decoders (models/gguf_gpt_decoders.h): gguf_gptneox,
// gguf_gptneox_sequential, gguf_gpt2, gguf_starcoder, gguf_falcon, gguf_falcon40b, gguf_bloom and
// gguf_mpt, written by llama.cpp's own converter (scripts/make_gguf_gpt_fixtures.py) from tiny
// GPTNeoXForCausalLM, GPT2LMHeadModel, GPTBigCodeForCausalLM, FalconForCausalLM, BloomForCausalLM
// and MptForCausalLM checkpoints of the Hugging Face fixtures' shapes. Their logits, decode steps
// and greedy tokens against transformers' (which llama.cpp's match within the script's
// LLAMACPP_BOUND: its --llamacpp pass), their configs as the Hugging Face fixtures', and the
// refusal of what the reader does not take.
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

class GgufGptF32 : public ::testing::TestWithParam<std::string> {};

// llama.cpp's CPU GELU looks the activation up in an fp16 table, and its gptneox runs the tanh
// GELU where Pythia's is the exact one: its looser bound.
TEST_P(GgufGptF32, LogitsDecodeAndGreedyTokensMatchTransformers) {
  testing::expect_gguf_fixture_matches(GetParam(), 5e-4f, 2e-2);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GgufGptF32,
                         ::testing::Values("gguf_gptneox", "gguf_gptneox_sequential", "gguf_gpt2", "gguf_starcoder",
                                           "gguf_falcon", "gguf_falcon40b", "gguf_bloom", "gguf_mpt"),
                         [](const auto& p) { return p.param; });

struct Pair {
  const char* gguf;
  const char* hf;
};

// Each file reads as its Hugging Face fixture: the attention, norms, MLP, residual, positions and
// head; every tensor of the fixture under the same name (the fused q|k|v taken apart alike). The
// sequential NeoX file keeps the biases its source has (llama.cpp requires them), the fixture has none.
TEST(GgufGpt, ReadsAsItsHuggingFaceConfig) {
  for (const Pair& p : {Pair{"gguf_gptneox", "gpt_neox"}, Pair{"gguf_gptneox_sequential", "gpt_neox_sequential"},
                        Pair{"gguf_gpt2", "gpt2"}, Pair{"gguf_starcoder", "gpt_bigcode"}, Pair{"gguf_falcon", "falcon"},
                        Pair{"gguf_falcon40b", "falcon_new"}, Pair{"gguf_bloom", "bloom"}, Pair{"gguf_mpt", "mpt"}}) {
    SCOPED_TRACE(p.gguf);
    const auto [hf, file] = testing::open_gguf_and_hf(p.gguf, p.hf);
    ASSERT_TRUE(hf && file);
    ModelConfig h = hf->config();
    const ModelConfig& g = file->config();
    // gguf_falcon40b's source is falcon_new at theta 10000 (the converter writes no RoPE base).
    if (std::string(p.gguf) == "gguf_falcon40b") h.rope_theta = 10000.0f;
    testing::expect_same_attention(g, h);
    testing::expect_same_dense_layer(g, h);
    EXPECT_EQ(g.learned_positions, h.learned_positions);
    EXPECT_EQ(g.alibi_slopes, h.alibi_slopes);
    EXPECT_EQ(g.embed_norm, h.embed_norm);
    EXPECT_EQ(g.parallel_blocks, h.parallel_blocks);
    EXPECT_EQ(g.parallel_mlp_norm, h.parallel_mlp_norm);
    EXPECT_EQ(g.mlp_activation, h.mlp_activation);
    // (llama.cpp's falcon converter writes a context of 2048 whatever the model's, bloom's
    // seq_length or else the hidden size.)
    if (std::string(p.hf).find("falcon") == std::string::npos && std::string(p.hf) != "bloom") {
      EXPECT_EQ(g.max_position, h.max_position);
    }
    const bool biases = std::string(p.hf) != "gpt_neox_sequential";
    if (biases) {
      EXPECT_EQ(g.qkv_bias, h.qkv_bias);
      EXPECT_EQ(g.o_bias, h.o_bias);
    }
    const auto& gt = file->tensors();
    for (const auto& [name, t] : hf->tensors()) {
      EXPECT_EQ(gt.count(name), 1u) << name;
      if (gt.count(name) == 1 && name.find("up_proj") == std::string::npos && name.find("down_proj") == std::string::npos) {
        EXPECT_EQ(gt.at(name).shape, t.shape) << name;
      }
    }
  }
}

// A gptneox file without use_parallel_residual is refused naming the key; an attn_qkv whose rows
// do not fit the heads, naming the tensor.
TEST(GgufGpt, RefusesMissingParallelResidualAndMisshapedQkv) {
  const testing::TempDir dir("gguf_gpt");
  using testing::gguf_str;
  using testing::gguf_u32;
  std::vector<testing::GgufKv> kv = {
      gguf_str("general.architecture", "gptneox"), gguf_u32("gptneox.block_count", 1),
      gguf_u32("gptneox.context_length", 64),      gguf_u32("gptneox.embedding_length", 32),
      gguf_u32("gptneox.feed_forward_length", 128), gguf_u32("gptneox.attention.head_count", 4),
      gguf_u32("gptneox.rope.dimension_count", 4), {"gptneox.attention.layer_norm_epsilon", 6, 0, 1e-5f}};
  testing::expect_refused(dir.file("no_par.gguf"), kv, {{"token_embd.weight", {32, 64}}}, StatusCode::corrupt,
                          "gptneox.use_parallel_residual");
  kv.push_back(testing::gguf_bool("gptneox.use_parallel_residual", true));
  testing::expect_refused(dir.file("qkv.gguf"), kv, {{"token_embd.weight", {32, 64}}, {"blk.0.attn_qkv.weight", {32, 80}}},
                          StatusCode::corrupt, "blk.0.attn_qkv.weight");
}

// An mpt file whose max_alibi_bias is not transformers' 8 (or 0: no ALiBi, no positions), or with
// MPT's q/k norms, and a bloom file without the embeddings' LayerNorm, are refused by name.
TEST(GgufGpt, RefusesMptAlibiOtherThanEightAndBloomWithoutItsEmbeddingNorm) {
  const testing::TempDir dir("gguf_alibi");
  using testing::gguf_str;
  using testing::gguf_u32;
  auto keys = [](const std::string& a) {
    return std::vector<testing::GgufKv>{
        gguf_str("general.architecture", a),       gguf_u32(a + ".block_count", 1),
        gguf_u32(a + ".context_length", 64),       gguf_u32(a + ".embedding_length", 32),
        gguf_u32(a + ".feed_forward_length", 128), gguf_u32(a + ".attention.head_count", 4),
        {a + ".attention.layer_norm_epsilon", 6, 0, 1e-5f}};
  };
  const std::vector<std::pair<std::string, std::vector<uint64_t>>> embd = {{"token_embd.weight", {32, 64}}};
  for (float bias : {0.0f, 16.0f}) {
    auto kv = keys("mpt");
    if (bias > 0.0f) kv.push_back({"mpt.attention.max_alibi_bias", 6, 0, bias});
    testing::expect_refused(dir.file("mpt.gguf"), kv, embd, StatusCode::unsupported, "mpt.attention.max_alibi_bias");
  }
  auto kv = keys("mpt");
  kv.push_back({"mpt.attention.max_alibi_bias", 6, 0, 8.0f});
  testing::expect_refused(dir.file("mpt_qk.gguf"), kv, {{"token_embd.weight", {32, 64}}, {"blk.0.attn_q_norm.weight", {32}}},
                          StatusCode::unsupported, "blk.0.attn_q_norm.weight");
  testing::expect_refused(dir.file("bloom.gguf"), keys("bloom"), embd, StatusCode::corrupt, "token_embd_norm.weight");
}

}  // namespace
}  // namespace brigade
