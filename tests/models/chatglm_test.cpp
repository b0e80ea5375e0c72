// ChatGLM's remote-code checkpoints as GlmForCausalLM (models/chatglm_config.h): the config's names
// and defaults, its refusals, and query_key_value split into q/k/v. The logits against
// transformers are HfFixture's chatglm (tests/models/hf_fixture_test.cpp), llama.cpp's chatglm GGUF
// gguf_llama_variants_test.cpp's gguf_chatglm and gguf_glm_edge.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/chatglm_config.h"
#include "models/model_config.h"
#include "split_test_util.h"

namespace brigade {
namespace {

using testing::numbered_rows;
using testing::source_rows;

TEST(ChatGLM, ReadsTheConfigAsGlm) {
  const nlohmann::json fixture = testing::fixture_config("chatglm");
  auto c = parse_hf_config(fixture.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "glm");
  EXPECT_EQ(c->n_layers, 2);
  EXPECT_EQ(c->n_heads, 4);
  EXPECT_EQ(c->n_kv_heads, 2) << "multi_query_group_num";
  EXPECT_EQ(c->head_dim, 16) << "kv_channels";
  EXPECT_EQ(c->intermediate_size, 128) << "ffn_hidden_size";
  EXPECT_EQ(c->vocab_size, 256) << "padded_vocab_size";
  EXPECT_EQ(c->max_position, 256) << "seq_length";
  EXPECT_FLOAT_EQ(c->rope_theta, 5e6f) << "10000 * rope_ratio";
  EXPECT_EQ(c->rope_dims(), 8) << "half of each head";
  EXPECT_EQ(c->rope_style, RopeStyle::interleaved);
  EXPECT_TRUE(c->qkv_bias && !c->o_bias && !c->tie_embeddings);
  EXPECT_FLOAT_EQ(c->rms_eps, 1.5625e-07f);

  // ChatGLMConfig's defaults (chatglm2-6b's shape): no multi-query unless asked, rope_ratio 1.
  nlohmann::json bare = {{"architectures", {"ChatGLMModel"}}, {"multi_query_group_num", 2}};
  c = parse_hf_config(bare.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->n_layers, 28);
  EXPECT_EQ(c->hidden_size, 4096);
  EXPECT_EQ(c->n_kv_heads, 32) << "multi_query_attention false: every head its own k/v";
  EXPECT_EQ(c->vocab_size, 65024);
  EXPECT_FLOAT_EQ(c->rope_theta, 10000.0f);
  EXPECT_FALSE(c->qkv_bias);

  const std::vector<std::pair<std::function<void(nlohmann::json&)>, const char*>> refused = {
      {[](nlohmann::json& j) { j["rmsnorm"] = false; }, "rmsnorm"},
      {[](nlohmann::json& j) { j["post_layer_norm"] = false; }, "post_layer_norm"},
      {[](nlohmann::json& j) { j["apply_residual_connection_post_layernorm"] = true; }, "apply_residual_connection_post_layernorm"},
      {[](nlohmann::json& j) { j["add_bias_linear"] = true; }, "add_bias_linear"},
      {[](nlohmann::json& j) { j["pre_seq_len"] = 128; }, "pre_seq_len"},
      {[](nlohmann::json& j) { j["quantization_bit"] = 4; }, "quantization_bit"},
      {[](nlohmann::json& j) { j["vision_config"] = {{"num_hidden_layers", 2}}; }, "vision_config"},
      {[](nlohmann::json& j) { j["rope_ratio"] = 0; }, "rope_ratio"}};
  testing::expect_config_refused(fixture, refused);
  nlohmann::json unquantized = fixture;
  unquantized["quantization_bit"] = 0;  // what glm-4-9b-chat's own config says
  EXPECT_TRUE(parse_hf_config(unquantized.dump()).has_value());
}

TEST(ChatGLM, SplitsQueryKeyValueAndRenames) {
  std::vector<std::vector<float>> store;
  std::map<std::string, RawTensor> in;
  const std::string attn = "transformer.encoder.layers.3.self_attention.query_key_value.";
  in.emplace(attn + "weight", numbered_rows(attn + "weight", {8, 2}, store));  // q 4 rows, k 2, v 2
  in.emplace(attn + "bias", numbered_rows(attn + "bias", {8}, store));
  for (const char* name : {"transformer.embedding.word_embeddings.weight", "transformer.encoder.final_layernorm.weight",
                           "transformer.output_layer.weight", "transformer.encoder.layers.3.self_attention.dense.weight",
                           "transformer.encoder.layers.3.mlp.dense_h_to_4h.weight",
                           "transformer.encoder.layers.3.mlp.dense_4h_to_h.weight",
                           "transformer.encoder.layers.3.input_layernorm.weight", "transformer.rotary_pos_emb.inv_freq"})
    in.emplace(name, numbered_rows(name, {2, 2}, store));
  auto out = chatglm_tensors(4, 2, in);
  ASSERT_TRUE(out.has_value()) << out.status().to_string();
  for (const char* kind : {"weight", "bias"}) {
    const std::string layer = std::string("model.layers.3.self_attn.");
    const RawTensor& q = out->at(layer + "q_proj." + kind);
    const RawTensor& k = out->at(layer + "k_proj." + kind);
    const RawTensor& v = out->at(layer + "v_proj." + kind);
    EXPECT_EQ(q.shape[0], 4);
    EXPECT_EQ(k.shape[0], 2);
    EXPECT_EQ(source_rows(q)[0], 0.0f);
    EXPECT_EQ(source_rows(k)[0], 4.0f) << kind;
    EXPECT_EQ(source_rows(v)[1], 7.0f) << kind;
    EXPECT_EQ(v.name, layer + "v_proj." + kind);
  }
  for (const char* name : {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight",
                           "model.layers.3.self_attn.o_proj.weight", "model.layers.3.mlp.gate_up_proj.weight",
                           "model.layers.3.mlp.down_proj.weight", "model.layers.3.input_layernorm.weight"})
    EXPECT_TRUE(out->contains(name)) << name;
  EXPECT_EQ(out->size(), 6u + 7u) << "the inv_freq buffer is dropped";

  in.erase(attn + "bias");
  in.insert_or_assign(attn + "weight", numbered_rows(attn + "weight", {10, 2}, store));
  const Status st = chatglm_tensors(4, 2, in).status();
  EXPECT_EQ(st.code(), StatusCode::corrupt);
  EXPECT_NE(st.message().find(attn + "weight"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace brigade
