// InternLM 2 and 3 (models/internlm_config.h): their config flags and refusals, and InternLM2's
// wqkv taken apart per KV group. The logits against transformers are HfFixture's (internlm2,
// internlm2_bias, internlm3: tests/models/hf_fixture_test.cpp), InternVL on InternLM2 is
// internvl_test.cpp's internvl_internlm2, llama.cpp's internlm2 GGUF gguf_llama_variants_test.cpp's.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/internlm_config.h"
#include "models/model_config.h"
#include "split_test_util.h"

namespace brigade {
namespace {

using testing::numbered_rows;
using testing::source_rows;

nlohmann::json internlm2_json() {
  return {{"architectures", {"InternLM2ForCausalLM"}}, {"model_type", "internlm2"}, {"hidden_size", 64},
          {"num_hidden_layers", 2}, {"num_attention_heads", 8}, {"num_key_value_heads", 2},
          {"intermediate_size", 128}, {"vocab_size", 256}, {"max_position_embeddings", 32768},
          {"rms_norm_eps", 1e-5}, {"rope_theta", 1000000.0}, {"rope_scaling", {{"type", "dynamic"}, {"factor", 2.0}}},
          {"tie_word_embeddings", false}, {"bias", false}};
}

TEST(InternLM, ReadsInternLM2Config) {
  auto c = parse_hf_config(internlm2_json().dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "internlm2");
  EXPECT_EQ(c->head_dim, 8);
  EXPECT_EQ(c->n_kv_heads, 2);
  EXPECT_FALSE(c->qkv_bias || c->o_bias || c->mlp_bias);
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::dynamic);
  EXPECT_EQ(c->sliding_window, 0);

  nlohmann::json j = internlm2_json();
  j.erase("bias");  // InternLM2Config's default: biased wqkv and wo
  c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_TRUE(c->qkv_bias && c->o_bias);
  EXPECT_FALSE(c->mlp_bias);

  for (const auto& [key, value] : {std::pair<const char*, nlohmann::json>{"quantization_config", {{"quant_method", "awq"}}},
                                   {"hidden_act", "gelu"}}) {
    j = internlm2_json();
    j[key] = value;
    const Status st = parse_hf_config(j.dump()).status();
    EXPECT_FALSE(st.is_ok()) << key;
    EXPECT_NE(st.message().find(key), std::string::npos) << st.message();
  }
}

TEST(InternLM, ReadsInternLM3Config) {
  nlohmann::json j = {{"architectures", {"InternLM3ForCausalLM"}}, {"model_type", "internlm3"}, {"hidden_size", 64},
                      {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                      {"head_dim", 32}, {"intermediate_size", 128}, {"vocab_size", 256},
                      {"max_position_embeddings", 256}, {"rms_norm_eps", 1e-5}, {"rope_theta", 5e7},
                      {"qkv_bias", true}, {"bias", false}};
  auto c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "internlm3");
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_FALSE(c->o_bias || c->mlp_bias);
  j["qkv_bias"] = false, j["bias"] = true;
  c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_FALSE(c->qkv_bias);
  EXPECT_TRUE(c->o_bias && c->mlp_bias);
}

// 4 query heads over 2 KV groups, heads of 2 rows, hidden 3: wqkv's 16 rows are [q0 q1 k0 v0 | q2 q3 k1 v1]
// head by head, so q_proj takes rows 0-3 and 8-11, k_proj 4-5 and 12-13, v_proj 6-7 and 14-15; the
// bias alike. Under InternVLChatModel's language_model. prefix too, the tower's names untouched.
TEST(InternLM, SplitsWqkvPerKvGroup) {
  ModelConfig c;
  c.arch = "internlm2", c.hidden_size = 3, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 2;
  std::vector<std::vector<float>> store;
  for (const std::string prefix : {"", "language_model."}) {
    std::map<std::string, RawTensor> in;
    for (const std::string name : {"model.layers.1.attention.wqkv.weight", "model.layers.1.attention.wqkv.bias"}) {
      const bool weight = name.ends_with("weight");
      in.emplace(prefix + name, numbered_rows(prefix + name, weight ? std::vector<int64_t>{16, 3} : std::vector<int64_t>{16}, store));
    }
    for (const std::string name : {"model.tok_embeddings.weight", "model.layers.1.attention.wo.weight",
                                   "model.layers.1.attention_norm.weight", "model.layers.1.ffn_norm.weight",
                                   "model.layers.1.feed_forward.w1.weight", "model.layers.1.feed_forward.w2.weight",
                                   "model.layers.1.feed_forward.w3.weight", "model.norm.weight", "output.weight"})
      in.emplace(prefix + name, numbered_rows(prefix + name, {2, 3}, store));
    in.emplace("vision_model.encoder.layers.0.attn.qkv.weight", numbered_rows("vision_model.encoder.layers.0.attn.qkv.weight", {6, 3}, store));
    std::vector<std::vector<uint8_t>> arena;
    auto out = internlm2_tensors(c, in, arena);
    ASSERT_TRUE(out.has_value()) << out.status().to_string();
    for (const char* part : {"weight", "bias"}) {
      const std::string attn = prefix + "model.layers.1.self_attn.";
      EXPECT_EQ(source_rows(out->at(attn + "q_proj." + part)), (std::vector<int>{0, 1, 2, 3, 8, 9, 10, 11})) << prefix << part;
      EXPECT_EQ(source_rows(out->at(attn + "k_proj." + part)), (std::vector<int>{4, 5, 12, 13})) << prefix << part;
      EXPECT_EQ(source_rows(out->at(attn + "v_proj." + part)), (std::vector<int>{6, 7, 14, 15})) << prefix << part;
      EXPECT_EQ(out->at(attn + "q_proj." + part).name, attn + "q_proj." + part);
    }
    EXPECT_EQ(out->at(prefix + "model.layers.1.self_attn.q_proj.weight").shape, (std::vector<int64_t>{8, 3}));
    for (const std::string name : {"model.embed_tokens.weight", "model.layers.1.self_attn.o_proj.weight",
                                   "model.layers.1.input_layernorm.weight", "model.layers.1.post_attention_layernorm.weight",
                                   "model.layers.1.mlp.gate_proj.weight", "model.layers.1.mlp.down_proj.weight",
                                   "model.layers.1.mlp.up_proj.weight", "model.norm.weight", "lm_head.weight"})
      EXPECT_TRUE(out->contains(prefix + name)) << prefix + name;
    EXPECT_TRUE(out->contains("vision_model.encoder.layers.0.attn.qkv.weight")) << "the tower's names are not the LLM's";
    EXPECT_EQ(out->size(), 9u + 6u + 1u);
  }

  // One KV group (MHA's layout is [q.. k v] whole): views of the stored bytes, no copies.
  ModelConfig one = c;
  one.n_kv_heads = 1, one.n_heads = 2;
  std::map<std::string, RawTensor> in;
  in.emplace("model.layers.0.attention.wqkv.weight", numbered_rows("model.layers.0.attention.wqkv.weight", {8, 3}, store));
  std::vector<std::vector<uint8_t>> arena;
  auto out = internlm2_tensors(one, in, arena);
  ASSERT_TRUE(out.has_value()) << out.status().to_string();
  EXPECT_TRUE(arena.empty());
  EXPECT_EQ(source_rows(out->at("model.layers.0.self_attn.v_proj.weight")), (std::vector<int>{6, 7}));
}

TEST(InternLM, RefusesWqkvOfTheWrongShape) {
  ModelConfig c;
  c.arch = "internlm2", c.hidden_size = 3, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 2;
  std::vector<std::vector<float>> store;
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{12, 3}, std::vector<int64_t>{16, 4}, std::vector<int64_t>{16}}) {
    std::map<std::string, RawTensor> in;
    in.emplace("model.layers.0.attention.wqkv.weight", numbered_rows("model.layers.0.attention.wqkv.weight", shape, store));
    std::vector<std::vector<uint8_t>> arena;
    const Status st = internlm2_tensors(c, in, arena).status();
    EXPECT_EQ(st.code(), StatusCode::corrupt) << st.to_string();
    EXPECT_NE(st.message().find("model.layers.0.attention.wqkv.weight"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("[16, 3]"), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace brigade
