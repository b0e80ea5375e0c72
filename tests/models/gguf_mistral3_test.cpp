// llama.cpp's mistral3 GGUF files (Ministral 3, Devstral Small 2, and Mistral Small 3.x's language
// model from current converters; models/gguf_llama_variants.h): gguf_ministral3, written by
// llama.cpp's own converter (scripts/make_gguf_llama_variants_fixtures.py) from the tiny
// Ministral3ForCausalLM of tests/fixtures/ministral3_text without its window (llama.cpp's mistral3
// has none). Its config as the Hugging Face fixture's, what the file exercises (YaRN's factor, the
// query temperature), and the keys with their refusals. The logits: GgufLlamaVariantsF32
// (gguf_llama_variants_test.cpp).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "gguf_variants_util.h"
#include "gguf_writer.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/model_config.h"

namespace brigade {
namespace {

using testing::expect_refused;
using testing::fixture_dir;
using testing::gguf_path;

// gguf_ministral3 reads as tests/fixtures/ministral3_text but for the window: YaRN factor 4 over
// 16 positions (mscale 1 of mscale_all_dim 1: cos/sin unscaled), the query temperature 0.3 over
// 16 positions on every layer, offset 0; q/k rows permuted for RoPE of adjacent pairs.
TEST(GgufMistral3, ReadsAsItsHuggingFaceConfig) {
  auto hf = Checkpoint::open(fixture_dir("ministral3_text"));
  ASSERT_TRUE(hf.has_value()) << hf.status().to_string();
  const ModelConfig& h = (*hf)->config();
  const ModelConfig g = testing::open_config("gguf_ministral3");
  testing::expect_same_attention(g, h, testing::RopeRows::permuted);
  EXPECT_EQ(g.rope_scaling.type, RopeScalingType::yarn);
  EXPECT_EQ(g.rope_scaling.factor, h.rope_scaling.factor);
  EXPECT_EQ(g.rope_scaling.original_max_position, h.rope_scaling.original_max_position);
  EXPECT_EQ(g.rope_scaling.beta_fast, h.rope_scaling.beta_fast);
  EXPECT_EQ(g.rope_scaling.beta_slow, h.rope_scaling.beta_slow);
  EXPECT_FLOAT_EQ(rope_attention_factor(g.rope_scaling), rope_attention_factor(h.rope_scaling));
  EXPECT_FLOAT_EQ(rope_attention_factor(g.rope_scaling), 1.0f);
  EXPECT_EQ(g.attn_temperature_floor, h.attn_temperature_floor);
  EXPECT_FLOAT_EQ(g.attn_temperature_scale, h.attn_temperature_scale);
  EXPECT_EQ(g.attn_temperature_offset, 0.0f);
  EXPECT_TRUE(g.attn_temperature_all_layers);
  EXPECT_EQ(g.sliding_window, 0);
  EXPECT_EQ(h.sliding_window, 16) << "the fixture's window, which the GGUF source drops";
}

// What gguf_ministral3 exercises: the temperature (dropped, or with Llama 4's offset) and YaRN's
// magnitude factor (transformers' default mscale(4, 1) instead of the file's 1).
TEST(GgufMistral3, TemperatureAndYarnFactorChangeTheResult) {
  const std::string path = gguf_path("gguf_ministral3");
  for (const auto& edit : std::vector<std::function<void(ModelConfig&)>>{
           [](ModelConfig& c) { c.attn_temperature_floor = 0.0f; },
           [](ModelConfig& c) { c.attn_temperature_offset = 1.0f; },
           [](ModelConfig& c) { c.rope_scaling.attention_factor = yarn_mscale(c.rope_scaling.factor, 1.0f); }})
    EXPECT_GT(testing::max_diff_with_rules("gguf_ministral3", edit, path), 10 * testing::kLogitTol);
}

// mistral3's keys: without YaRN or the temperature it is llama's layer (Mistral Small 3.1's text
// model as current converters write it); the temperature's positions are context_length then.
// Refused, naming the key: another scaling type, a log multiplier without YaRN, bad numbers.
TEST(GgufMistral3, KeysAndTheirRefusals) {
  const testing::TempDir dir("gguf_mistral3");
  using testing::gguf_str;
  using testing::gguf_u32;
  auto f32 = [](const std::string& key, float v) {
    testing::GgufKv kv{key, 6};
    kv.f = v;
    return kv;
  };
  const std::vector<testing::GgufKv> common = {
      gguf_str("general.architecture", "mistral3"), gguf_u32("mistral3.block_count", 1),
      gguf_u32("mistral3.context_length", 4096),    gguf_u32("mistral3.embedding_length", 32),
      gguf_u32("mistral3.feed_forward_length", 64), gguf_u32("mistral3.attention.head_count", 4),
      gguf_u32("mistral3.attention.head_count_kv", 2)};
  const std::vector<std::pair<std::string, std::vector<uint64_t>>> tensors = {{"token_embd.weight", {32, 64}}};
  auto open = [&](std::vector<testing::GgufKv> extra) {
    std::vector<testing::GgufKv> kv = common;
    kv.insert(kv.end(), extra.begin(), extra.end());
    testing::write_gguf_zeros(dir.file("m.gguf"), kv, tensors);
    auto ck = Checkpoint::open(dir.file("m.gguf"));
    EXPECT_TRUE(ck.has_value()) << ck.status().to_string();
    return ck ? (*ck)->config() : ModelConfig{};
  };
  const ModelConfig plain = open({});
  EXPECT_EQ(plain.arch, "llama");
  EXPECT_EQ(plain.rope_style, RopeStyle::interleaved);
  EXPECT_EQ(plain.rope_scaling.type, RopeScalingType::none);
  EXPECT_EQ(plain.attn_temperature_floor, 0.0f);
  const ModelConfig unscaled = open({f32("mistral3.attention.temperature_scale", 0.1f)});
  EXPECT_EQ(unscaled.arch, "ministral3");
  EXPECT_EQ(unscaled.attn_temperature_floor, 4096.0f) << "context_length without YaRN";
  EXPECT_FLOAT_EQ(unscaled.attn_temperature_scale, 0.1f);
  EXPECT_EQ(open({f32("mistral3.attention.temperature_scale", 0.0f)}).attn_temperature_floor, 0.0f);
  const ModelConfig yarn = open({gguf_str("mistral3.rope.scaling.type", "yarn"), f32("mistral3.rope.scaling.factor", 16.0f),
                                 gguf_u32("mistral3.rope.scaling.original_context_length", 256),
                                 f32("mistral3.rope.scaling.yarn_log_multiplier", 2.0f),
                                 f32("mistral3.attention.temperature_scale", 0.1f)});
  EXPECT_EQ(yarn.attn_temperature_floor, 256.0f) << "YaRN's original context";
  EXPECT_FLOAT_EQ(rope_attention_factor(yarn.rope_scaling), yarn_mscale(16.0f, 1.0f) / yarn_mscale(16.0f, 2.0f));

  const std::vector<std::tuple<std::vector<testing::GgufKv>, StatusCode, std::string>> refused = {
      {{gguf_str("mistral3.rope.scaling.type", "longrope")}, StatusCode::unsupported, "rope.scaling.type"},
      {{f32("mistral3.rope.scaling.yarn_log_multiplier", 1.0f)}, StatusCode::unsupported, "yarn_log_multiplier"},
      {{f32("mistral3.rope.scaling.yarn_log_multiplier", -1.0f)}, StatusCode::corrupt, "yarn_log_multiplier"},
      {{gguf_str("mistral3.attention.temperature_scale", "x")}, StatusCode::corrupt, "temperature_scale"}};
  for (const auto& [extra, code, key] : refused) {
    std::vector<testing::GgufKv> kv = common;
    kv.insert(kv.end(), extra.begin(), extra.end());
    expect_refused(dir.file("refused.gguf"), kv, tensors, code, key);
  }
}

}  // namespace
}  // namespace brigade
